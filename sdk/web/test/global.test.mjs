// dist/mnv.global.js, run as a classic script in a fresh realm with a fake window and document,
// defines window.Mnv with the module's functions, and they work.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import vm from 'node:vm';
import * as mod from '../src/mnv.js';
import { startServer, reply, fail, captured } from './helpers.mjs';

const source = readFileSync(new URL('../dist/mnv.global.js', import.meta.url), 'utf8');

let s;
before(async () => (s = await startServer()));
after(() => s.close());

function load({ src, connection } = {}) {
  const window = {};
  const context = {
    window,
    document: { currentScript: src ? { src } : null },
    navigator: connection ? { connection } : {},
    fetch, AbortController, URL, URLSearchParams, setTimeout, clearTimeout,
  };
  vm.runInNewContext(source, context, { filename: 'mnv.global.js' });
  return window.Mnv;
}

test('window.Mnv has exactly the module\'s exports', () => {
  const Mnv = load();
  assert.deepEqual(Object.keys(Mnv).sort(), Object.keys(mod).sort());
  for (const k of Object.keys(mod)) assert.equal(typeof Mnv[k], typeof mod[k], k);
  assert.ok(Object.isFrozen(Mnv));
});

test('loaded from the gateway, it calls the API beside it', async () => {
  s.handle = (req, res) => reply(res, 200, captured);
  const Mnv = load({ src: s.origin + '/sdk/v1/mnv.global.js' });
  assert.deepEqual({ ...(await Mnv.capture({ transactionId: 'tx 1' })) }, captured);
  assert.equal(s.requests.at(-1).url, '/v1/api/web/transactions/tx%201/capture');

  s.handle = (req, res) => fail(res, 409, 'ALREADY_USED');
  const err = await Mnv.capture({ transactionId: 'tx' }).catch((e) => e);
  assert.ok(err instanceof Mnv.MnvError);
  assert.equal(err.code, 'ALREADY_USED');
  assert.equal(err.httpStatus, 409);
  assert.equal(err.requestId, 'req-409');
});

test('loaded from elsewhere, baseUrl is required', async () => {
  const Mnv = load({ src: 'https://cdn.example/lib/mnv.js' });
  await assert.rejects(Mnv.capture({ transactionId: 'tx' }), (e) => e.name === 'TypeError' && /baseUrl/.test(e.message));
});

test('network() reads navigator.connection', () => {
  const plain = (o) => ({ ...o });
  assert.deepEqual(plain(load({ connection: { type: 'wifi', effectiveType: '4g' } }).network()), { type: 'wifi', effectiveType: '4g', cellular: false, wifi: true });
  assert.deepEqual(plain(load({ connection: { type: 'cellular', effectiveType: '3g' } }).network()), { type: 'cellular', effectiveType: '3g', cellular: true, wifi: false });
  assert.deepEqual(plain(load({ connection: { effectiveType: '4g' } }).network()), { type: null, effectiveType: '4g', cellular: null, wifi: null });
  assert.deepEqual(plain(load({ connection: { type: 'unknown' } }).network()), { type: 'unknown', effectiveType: null, cellular: null, wifi: null });
});

test('the committed build is the one the script makes from src/mnv.js', async () => {
  const { execFileSync } = await import('node:child_process');
  execFileSync(process.execPath, [new URL('../scripts/build-global.mjs', import.meta.url).pathname, '--check']);
});
