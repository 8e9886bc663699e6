// The page's side of a verification workflow: read, wait for the code, check it, resend. The
// server is a real HTTP server answering like the gateway; the routes' own behaviour is proved
// against the real services in tests/gateway (TestWorkflowCodeOnThePage).
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { workflowState, waitForCode, checkCode, resendCode, codeEntry, MnvError } from '../src/mnv.js';
import { startServer, reply, fail } from './helpers.mjs';

let s;
before(async () => (s = await startServer()));
after(() => s.close());
beforeEach(() => {
  s.requests = [];
});

const silent = { status: 'IN_PROGRESS', channel: 'SILENT', codeExpected: false, attemptsLeft: 0, resendsLeft: 3 };
const sms = { status: 'IN_PROGRESS', channel: 'SMS_OTP', codeExpected: true, attemptsLeft: 5, resendsLeft: 3, resendAt: '2026-01-01T00:00:30Z', codeExpiresAt: '2026-01-01T00:05:00Z' };

test('workflowState reads the transaction’s workflow with GET, no credential, URL-encoded', async () => {
  s.handle = (req, res) => reply(res, 200, sms);
  assert.deepEqual(await workflowState({ transactionId: 't/1', baseUrl: s.baseUrl }), sms);
  const q = s.requests[0];
  assert.equal(q.method, 'GET');
  assert.equal(q.url, '/v1/api/web/transactions/t%2F1/workflow');
  for (const h of ['cookie', 'authorization', 'x-api-key']) assert.equal(q.headers[h], undefined, h);
});

test('waitForCode waits out NOT_FOUND and the silent step, then resolves when a code is expected', async () => {
  const answers = [(res) => fail(res, 404, 'NOT_FOUND'), (res) => reply(res, 200, silent), (res) => reply(res, 200, sms)];
  s.handle = (req, res, n) => answers[Math.min(n, answers.length) - 1](res);
  const w = await waitForCode({ transactionId: 'tx', baseUrl: s.baseUrl, intervalMs: 10 });
  assert.deepEqual(w, sms);
  assert.equal(s.requests.length, 3);
});

test('waitForCode resolves on an ended workflow, and rejects on other errors and after waitMs', async () => {
  s.handle = (req, res) => reply(res, 200, { status: 'VERIFIED', reason: 'NETWORK_VERIFIED' });
  assert.equal((await waitForCode({ transactionId: 'tx', baseUrl: s.baseUrl, intervalMs: 10 })).status, 'VERIFIED');
  s.handle = (req, res) => fail(res, 403, 'PERMISSION_DENIED');
  await assert.rejects(waitForCode({ transactionId: 'tx', baseUrl: s.baseUrl, intervalMs: 10 }), (e) => e instanceof MnvError && e.code === 'PERMISSION_DENIED');
  s.handle = (req, res) => reply(res, 200, silent);
  await assert.rejects(waitForCode({ transactionId: 'tx', baseUrl: s.baseUrl, intervalMs: 10, waitMs: 50 }), (e) => e instanceof MnvError && e.code === 'TIMEOUT');
  const ctl = new AbortController();
  const p = waitForCode({ transactionId: 'tx', baseUrl: s.baseUrl, intervalMs: 10, signal: ctl.signal });
  setTimeout(() => ctl.abort(), 30);
  await assert.rejects(p, (e) => e instanceof MnvError && e.code === 'ABORTED');
});

test('checkCode posts the code as JSON and resolves to the outcome', async () => {
  s.handle = (req, res) => reply(res, 200, { status: 'IN_PROGRESS', reason: 'CODE_MISMATCH', attemptsLeft: 4 });
  const r = await checkCode({ transactionId: 'tx', code: '123456', baseUrl: s.baseUrl });
  assert.equal(r.attemptsLeft, 4);
  const q = s.requests[0];
  assert.equal(q.method, 'POST');
  assert.equal(q.url, '/v1/api/web/transactions/tx/code');
  assert.deepEqual(JSON.parse(q.body), { code: '123456' });
  await assert.rejects(checkCode({ transactionId: 'tx', code: '', baseUrl: s.baseUrl }), TypeError);
  s.handle = (req, res) => fail(res, 409, 'CONFLICT');
  await assert.rejects(checkCode({ transactionId: 'tx', code: '1', baseUrl: s.baseUrl }), (e) => e.httpStatus === 409 && e.code === 'CONFLICT');
});

test('resendCode never waits out the cooldown: it rejects at once with retryAfterMs', async () => {
  s.handle = (req, res) => fail(res, 429, 'RATE_LIMITED', { headers: { 'Retry-After': '1' } });
  const err = await resendCode({ transactionId: 'tx', baseUrl: s.baseUrl }).then(assert.fail, (e) => e);
  assert.ok(err instanceof MnvError);
  assert.equal(err.code, 'RATE_LIMITED');
  assert.equal(err.retryAfterMs, 1000);
  assert.equal(s.requests.length, 1, 'a resend in the cooldown is not retried');
  assert.equal(s.requests[0].url, '/v1/api/web/transactions/tx/resend');
  s.handle = (req, res) => reply(res, 200, { ...sms, resendsLeft: 2 });
  assert.equal((await resendCode({ transactionId: 'tx', baseUrl: s.baseUrl })).resendsLeft, 2);
});

test('codeEntry refuses a missing container before touching the page', () => {
  assert.throws(() => codeEntry({ transactionId: 'tx' }), TypeError);
  assert.throws(() => codeEntry({ container: {} }), TypeError);
});
