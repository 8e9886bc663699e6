import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { capture, resumeCapture, createSession, network, MnvError, camaraAuthorizeUrl, camaraCode } from '../src/mnv.js';
import { startServer, reply, fail, captured } from './helpers.mjs';

let s;
before(async () => (s = await startServer()));
after(() => s.close());
beforeEach(() => {
  s.requests = [];
  s.handle = (req, res) => reply(res, 200, captured);
});

// rejects asserts an MnvError with the given fields.
async function rejects(p, want) {
  const err = await p.then(
    (v) => assert.fail('resolved: ' + JSON.stringify(v)),
    (e) => e,
  );
  assert.ok(err instanceof MnvError, 'not an MnvError: ' + err);
  assert.equal(err.name, 'MnvError');
  for (const [k, v] of Object.entries(want)) assert.equal(err[k], v, k);
  return err;
}

test('capture posts to the transaction, URL-encoded, without credentials, and resolves to data', async () => {
  const r = await capture({ transactionId: 'a/b c?d', baseUrl: s.baseUrl + '/' });
  assert.deepEqual(r, captured);
  assert.equal(s.requests.length, 1);
  const q = s.requests[0];
  assert.equal(q.method, 'POST');
  assert.equal(q.url, '/v1/api/web/transactions/a%2Fb%20c%3Fd/capture');
  assert.equal(q.body, '');
  for (const h of ['cookie', 'authorization', 'x-api-key', 'x-sdk-token', 'x-client-id', 'x-mnv-sandbox-msisdn', 'content-type']) {
    assert.equal(q.headers[h], undefined, h);
  }
});

test('capture sends the sandbox number only when given', async () => {
  await capture({ transactionId: 'tx', baseUrl: s.baseUrl, sandboxNumber: '+971501234567' });
  assert.equal(s.requests[0].headers['x-mnv-sandbox-msisdn'], '+971501234567');
});

test('createSession sends the token, the client id and the body it was given', async () => {
  s.handle = (req, res) => reply(res, 200, { sessionId: 's1', status: 'CAPTURED' });
  const d = await createSession({ sdkToken: 'tok', clientId: 'cli', platform: 'WEB', deviceId: 'dev', baseUrl: s.baseUrl, sandboxNumber: '+1' });
  assert.deepEqual(d, { sessionId: 's1', status: 'CAPTURED' });
  const q = s.requests[0];
  assert.equal(q.method, 'POST');
  assert.equal(q.url, '/v1/api/sdk/session');
  assert.equal(q.headers['x-sdk-token'], 'tok');
  assert.equal(q.headers['x-client-id'], 'cli');
  assert.equal(q.headers['x-mnv-sandbox-msisdn'], '+1');
  assert.match(q.headers['content-type'], /^application\/json/);
  assert.equal(q.headers.cookie, undefined);
  assert.deepEqual(JSON.parse(q.body), { platform: 'WEB', deviceId: 'dev' });
});

test('an error envelope becomes an MnvError with its code, status, message, field and request id', async (t) => {
  for (const [status, code, field] of [
    [404, 'NOT_FOUND', undefined],
    [409, 'ALREADY_USED', undefined],
    [403, 'PERMISSION_DENIED', undefined],
    [400, 'INVALID_ARGUMENT', 'platform'],
    [401, 'UNAUTHENTICATED', undefined],
    [500, 'INTERNAL', undefined],
  ]) {
    await t.test(code, async () => {
      s.requests = [];
      s.handle = (req, res) => fail(res, status, code, { field });
      const err = await rejects(capture({ transactionId: 'tx', baseUrl: s.baseUrl }), {
        code, httpStatus: status, message: code + ' happened', requestId: 'req-' + status, field: field ?? null,
      });
      assert.equal(err.cause, undefined);
      assert.equal(s.requests.length, 1, 'not retried');
    });
  }
});

test('an answer that is not the envelope is BAD_RESPONSE', async (t) => {
  const answers = {
    'proxy error page': (res) => res.writeHead(502, { 'Content-Type': 'text/html' }).end('<html>bad gateway</html>'),
    'success without envelope': (res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"status":"CAPTURED"}'),
    'empty 200': (res) => res.writeHead(200).end(),
    'error envelope on 200': (res) => res.writeHead(200).end('{"success":false,"data":null,"messages":[]}'),
    'error without messages': (res) => res.writeHead(404).end('{"success":false,"data":null,"messages":[]}'),
  };
  for (const [name, answer] of Object.entries(answers)) {
    await t.test(name, async () => {
      s.handle = (req, res) => answer(res);
      const err = await rejects(capture({ transactionId: 'tx', baseUrl: s.baseUrl }), { code: 'BAD_RESPONSE' });
      assert.ok(err.httpStatus >= 200, String(err.httpStatus));
    });
  }
});

test('a network failure is NETWORK_ERROR, never retried', async () => {
  s.handle = (req) => req.socket.destroy();
  const err = await rejects(capture({ transactionId: 'tx', baseUrl: s.baseUrl }), { code: 'NETWORK_ERROR', httpStatus: 0, requestId: undefined });
  assert.ok(err.cause, 'the fetch error is kept as the cause');
  assert.equal(s.requests.length, 1);
  await rejects(createSession({ sdkToken: 't', clientId: 'c', platform: 'WEB', baseUrl: 'http://127.0.0.1:1/v1/api' }), { code: 'NETWORK_ERROR', httpStatus: 0 });
});

test('429 and 503 with Retry-After are retried after the wait, at most twice', async () => {
  s.handle = (req, res, n) => (n === 1 ? fail(res, 429, 'RATE_LIMITED', { headers: { 'Retry-After': '1' } }) : reply(res, 200, captured));
  const t0 = Date.now();
  assert.deepEqual(await capture({ transactionId: 'tx', baseUrl: s.baseUrl }), captured);
  assert.ok(Date.now() - t0 >= 950, 'waited Retry-After: ' + (Date.now() - t0));
  assert.equal(s.requests.length, 2);

  s.requests = [];
  s.handle = (req, res) => fail(res, 503, 'UNAVAILABLE', { headers: { 'Retry-After': '0' } });
  await rejects(createSession({ sdkToken: 't', clientId: 'c', platform: 'IOS', baseUrl: s.baseUrl }), { code: 'UNAVAILABLE', httpStatus: 503 });
  assert.equal(s.requests.length, 3, 'one try and two retries');
});

test('no retry without Retry-After, on other statuses, or when the wait passes the timeout', async (t) => {
  const cases = {
    '503 without Retry-After': (res) => fail(res, 503, 'UNAVAILABLE'),
    '502 with Retry-After': (res) => fail(res, 502, 'INTERNAL', { headers: { 'Retry-After': '0' } }),
    '409 with Retry-After': (res) => fail(res, 409, 'ALREADY_USED', { headers: { 'Retry-After': '0' } }),
    'Retry-After beyond timeoutMs': (res) => fail(res, 429, 'RATE_LIMITED', { headers: { 'Retry-After': '30' } }),
  };
  for (const [name, answer] of Object.entries(cases)) {
    await t.test(name, async () => {
      s.requests = [];
      s.handle = (req, res) => answer(res);
      const t0 = Date.now();
      await rejects(capture({ transactionId: 'tx', baseUrl: s.baseUrl, timeoutMs: 2000 }), {});
      assert.equal(s.requests.length, 1);
      assert.ok(Date.now() - t0 < 1000);
    });
  }
});

test('no answer within timeoutMs is TIMEOUT', async () => {
  s.handle = () => {}; // never answers
  const t0 = Date.now();
  await rejects(capture({ transactionId: 'tx', baseUrl: s.baseUrl, timeoutMs: 150 }), { code: 'TIMEOUT', httpStatus: 0 });
  const took = Date.now() - t0;
  assert.ok(took >= 140 && took < 2000, String(took));
});

test('the caller aborting is ABORTED, also while waiting to retry, and before sending', async () => {
  s.handle = () => {};
  const ctl = new AbortController();
  setTimeout(() => ctl.abort(), 50);
  await rejects(capture({ transactionId: 'tx', baseUrl: s.baseUrl, signal: ctl.signal }), { code: 'ABORTED', httpStatus: 0 });

  s.handle = (req, res) => fail(res, 429, 'RATE_LIMITED', { headers: { 'Retry-After': '5' } });
  const ctl2 = new AbortController();
  setTimeout(() => ctl2.abort(), 100);
  const t0 = Date.now();
  await rejects(createSession({ sdkToken: 't', clientId: 'c', platform: 'WEB', baseUrl: s.baseUrl, signal: ctl2.signal }), { code: 'ABORTED' });
  assert.ok(Date.now() - t0 < 2000, 'stopped waiting');

  s.requests = [];
  await rejects(capture({ transactionId: 'tx', baseUrl: s.baseUrl, signal: AbortSignal.abort() }), { code: 'ABORTED' });
  assert.equal(s.requests.length, 0);
});

test('missing arguments are a TypeError naming them', async () => {
  // Loaded from a file, the module cannot tell where the API is.
  await assert.rejects(capture({ transactionId: 'tx' }), (e) => e instanceof TypeError && /baseUrl/.test(e.message));
  await assert.rejects(capture({ baseUrl: s.baseUrl }), (e) => e instanceof TypeError && /transactionId/.test(e.message));
  await assert.rejects(createSession({ sdkToken: 't', platform: 'WEB', baseUrl: s.baseUrl }), (e) => e instanceof TypeError && /clientId/.test(e.message));
  await assert.rejects(capture(), TypeError);
  assert.equal(s.requests.length, 0);
});

test('network() is all nulls where the browser tells nothing', () => {
  assert.deepEqual(network(), { type: null, effectiveType: null, cellular: null, wifi: null });
});

test('camaraAuthorizeUrl builds the code flow request for one CAMARA scope', () => {
  const u = new URL(camaraAuthorizeUrl({ issuer: 'https://api.example/', clientId: 'c-1', redirectUri: 'https://shop.example/cb', scope: 'share', state: 's-1', codeChallenge: 'ch' }));
  assert.equal(u.origin + u.pathname, 'https://api.example/oauth2/authorize');
  const q = Object.fromEntries(u.searchParams);
  assert.deepEqual(q, {
    response_type: 'code', client_id: 'c-1', redirect_uri: 'https://shop.example/cb',
    scope: 'openid number-verification:device-phone-number:read', state: 's-1', prompt: 'none',
    code_challenge: 'ch', code_challenge_method: 'S256',
  });
  assert.equal(new URL(camaraAuthorizeUrl({ issuer: 'https://api.example', clientId: 'c', redirectUri: 'r', scope: 'verify', state: 's' })).searchParams.get('scope'), 'openid number-verification:verify');
  assert.throws(() => camaraAuthorizeUrl({ issuer: 'https://api.example', clientId: 'c', redirectUri: 'r', scope: 'all', state: 's' }), TypeError);
  assert.throws(() => camaraAuthorizeUrl({ issuer: 'https://api.example', clientId: 'c', redirectUri: 'r', scope: 'verify' }), TypeError);
  // Loaded from a file, not the gateway, the issuer cannot be told.
  assert.throws(() => camaraAuthorizeUrl({ clientId: 'c', redirectUri: 'r', scope: 'verify', state: 's' }), TypeError);
});

test('camaraCode returns the code only for the state the page sent', () => {
  assert.equal(camaraCode({ url: 'https://shop.example/cb?code=abc&state=s-1', state: 's-1' }), 'abc');
  assert.throws(() => camaraCode({ url: 'https://shop.example/cb?code=abc&state=other', state: 's-1' }), (e) => e instanceof MnvError && e.code === 'STATE_MISMATCH');
  assert.throws(() => camaraCode({ url: 'https://shop.example/cb?error=access_denied&state=s-1', state: 's-1' }), (e) => e instanceof MnvError && e.code === 'access_denied');
  assert.throws(() => camaraCode({ url: 'https://shop.example/cb?state=s-1', state: 's-1' }), (e) => e instanceof MnvError && e.code === 'BAD_RESPONSE');
});

// page plays a browser tab on href for the duration of a test: location (assign is recorded,
// not followed), this tab's sessionStorage and history.
function page(t, href) {
  const store = new Map();
  const p = {
    href,
    assigned: [],
    replaced: [],
    storage: {
      getItem: (k) => (store.has(k) ? store.get(k) : null),
      setItem: (k, v) => store.set(k, String(v)),
      removeItem: (k) => store.delete(k),
    },
  };
  const loc = {
    get href() { return p.href; },
    get protocol() { return new URL(p.href).protocol; },
    assign: (u) => p.assigned.push(u),
  };
  const hist = { state: null, replaceState: (_s, _t, u) => { p.replaced.push(u); p.href = u; } };
  for (const [k, v] of [['location', loc], ['sessionStorage', p.storage], ['history', hist]]) {
    Object.defineProperty(globalThis, k, { value: v, configurable: true, writable: true });
  }
  t.after(() => {
    for (const k of ['location', 'sessionStorage', 'history']) delete globalThis[k];
  });
  return p;
}

const pending = {
  transactionId: 'tx-1', status: 'AUTHORIZATION_PENDING', operatorId: 'op-camara', encryptedMobileNumber: null,
  expiresAt: '2026-01-01T00:00:00.000Z', authorizationUrl: 'https://operator.example/authorize?state=s',
};

const PENDING_KEY = 'mnv.capture.pending';

// challengeOf is the S256 challenge of verifier, as mnv checks it.
function challengeOf(verifier) {
  return createHash('sha256').update(verifier).digest('base64url');
}

test('capture names the operator, this page as the way back (without its query and fragment) and a code challenge', async (t) => {
  page(t, 'https://shop.example/checkout?step=2#top');
  await capture({ transactionId: 'tx-1', baseUrl: s.baseUrl, operatorId: 'op-camara' });
  const u = new URL(s.requests[0].url, s.origin);
  assert.equal(u.pathname, '/v1/api/web/transactions/tx-1/capture');
  const q = Object.fromEntries(u.searchParams);
  assert.match(q.codeChallenge, /^[A-Za-z0-9_-]{43}$/);
  assert.deepEqual({ ...q, codeChallenge: 'c' }, { operatorId: 'op-camara', returnUrl: 'https://shop.example/checkout', codeChallenge: 'c' });
  assert.equal(s.requests[0].body, '');
  await capture({ transactionId: 'tx-1', baseUrl: s.baseUrl, returnUrl: 'https://shop.example/back' });
  const q2 = new URL(s.requests[1].url, s.origin).searchParams;
  assert.equal(q2.get('returnUrl'), 'https://shop.example/back');
  assert.notEqual(q2.get('codeChallenge'), q.codeChallenge, 'a fresh verifier per capture');
});

test('header enrichment: a captured answer resolves as before, and nothing is kept or followed', async (t) => {
  const p = page(t, 'https://shop.example/checkout');
  assert.deepEqual(await capture({ transactionId: 'tx', baseUrl: s.baseUrl }), captured);
  assert.deepEqual(p.assigned, []);
  assert.equal(p.storage.getItem(PENDING_KEY), null);
});

test('NETWORK_API: capture keeps its verifier, sends the browser to the operator and never settles', async (t) => {
  const p = page(t, 'https://shop.example/checkout');
  s.handle = (req, res) => reply(res, 200, pending);
  let settled = false;
  capture({ transactionId: 'tx-1', baseUrl: s.baseUrl, operatorId: 'op-camara' }).finally(() => (settled = true));
  for (let i = 0; i < 50 && p.assigned.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(p.assigned, [pending.authorizationUrl]);
  const kept = JSON.parse(p.storage.getItem(PENDING_KEY));
  assert.equal(kept.transactionId, 'tx-1');
  assert.equal(challengeOf(kept.verifier), new URL(s.requests[0].url, s.origin).searchParams.get('codeChallenge'));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(settled, false);
});

test("NETWORK_API, redirect 'manual': capture resolves to the authorization and goes nowhere", async (t) => {
  const p = page(t, 'https://shop.example/checkout');
  s.handle = (req, res) => reply(res, 200, pending);
  assert.deepEqual(await capture({ transactionId: 'tx-1', baseUrl: s.baseUrl, redirect: 'manual' }), pending);
  assert.deepEqual(p.assigned, []);
  assert.equal(JSON.parse(p.storage.getItem(PENDING_KEY)).transactionId, 'tx-1');
  await assert.rejects(capture({ transactionId: 'tx-1', baseUrl: s.baseUrl, redirect: 'popup' }), TypeError);
});

test('resumeCapture completes the capture this tab sent away, with its code and verifier, and clears the way back', async (t) => {
  const p = page(t, 'https://shop.example/checkout?step=2#mnv_code=c0de&mnv_transaction=tx%2F1');
  p.storage.setItem(PENDING_KEY, JSON.stringify({ transactionId: 'tx/1', verifier: 'v-1' }));
  const done = { ...captured, transactionId: 'tx/1' };
  s.handle = (req, res) => reply(res, 200, done);
  assert.deepEqual(await resumeCapture({ baseUrl: s.baseUrl }), done);
  const q = s.requests[0];
  assert.equal(q.method, 'POST');
  assert.equal(q.url, '/v1/api/web/transactions/tx%2F1/complete');
  assert.deepEqual(JSON.parse(q.body), { code: 'c0de', codeVerifier: 'v-1' });
  for (const h of ['cookie', 'authorization', 'x-api-key', 'x-sdk-token', 'x-client-id']) assert.equal(q.headers[h], undefined, h);
  assert.deepEqual(p.replaced, ['https://shop.example/checkout?step=2']);
  assert.equal(p.storage.getItem(PENDING_KEY), null);
  // The same return again (a reload, the back button) is no longer this tab's.
  p.href = 'https://shop.example/checkout#mnv_code=c0de&mnv_transaction=tx%2F1';
  await rejects(resumeCapture({ baseUrl: s.baseUrl }), { code: 'STATE_MISMATCH', httpStatus: 0 });
  assert.equal(s.requests.length, 1);
});

test('resumeCapture: no return is null; a return this tab did not start, an error or an expiry, without a call', async (t) => {
  const p = page(t, 'https://shop.example/checkout#section-2');
  assert.equal(await resumeCapture({ baseUrl: s.baseUrl }), null);
  assert.deepEqual(p.replaced, []);
  const mine = JSON.stringify({ transactionId: 'tx-1', verifier: 'v' });
  const cases = [
    ['another transaction', JSON.stringify({ transactionId: 'tx-2', verifier: 'v' }), '#mnv_transaction=tx-1&mnv_code=c', 'STATE_MISMATCH'],
    ['none started', null, '#mnv_transaction=tx-1&mnv_code=c', 'STATE_MISMATCH'],
    ['a kept value that is not ours', 'tx-1', '#mnv_transaction=tx-1&mnv_code=c', 'STATE_MISMATCH'],
    ['the operator did not answer', mine, '#mnv_transaction=tx-1&mnv_error=UNAVAILABLE', 'UNAVAILABLE'],
    ['no code', mine, '#mnv_transaction=tx-1', 'BAD_RESPONSE'],
  ];
  for (const [name, kept, fragment, code] of cases) {
    if (kept !== null) p.storage.setItem(PENDING_KEY, kept);
    await rejects(resumeCapture({ baseUrl: s.baseUrl, url: 'https://shop.example/checkout' + fragment }), { code, httpStatus: 0 });
    assert.equal(p.storage.getItem(PENDING_KEY), null, name);
  }
  p.storage.setItem(PENDING_KEY, mine);
  assert.deepEqual(await resumeCapture({ baseUrl: s.baseUrl, url: 'https://shop.example/#mnv_transaction=tx-1&mnv_status=EXPIRED' }),
    { transactionId: 'tx-1', status: 'EXPIRED', operatorId: null, encryptedMobileNumber: null, expiresAt: null });
  assert.equal(s.requests.length, 0);
  // Outside a page there is nothing to resume.
  delete globalThis.location;
  assert.equal(await resumeCapture(), null);
});
