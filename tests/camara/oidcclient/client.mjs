// A CAMARA client of mnv's facade written with openid-client, a certified OpenID Connect relying
// party, and none of mnv's own code: what "a client written against CAMARA points at mnv
// unchanged" means. It runs the whole flow once and prints one JSON line:
//
//   discovery → authorization URL (code flow, PKCE S256, state, nonce) → the device's visit
//   (redirects followed, the sandbox operator's number header sent as the network would) →
//   code exchange with client_secret_basic, the ID token validated by the library.
//
// Usage: node client.mjs '{"issuer":"http://127.0.0.1:8080","clientId":"…","clientSecret":"…",
//   "redirectUri":"http://127.0.0.1:7788/cb","scope":"openid number-verification:verify",
//   "numberHeader":"X-Mnv-Sandbox-Msisdn","number":"+971551234567"}'
//
// Success: {"ok":true,"claims":{…ID token claims…},"accessToken":"…","scope":"…","tokenType":"…",
// "expiresIn":N}. Failure: {"ok":false,"stage":"…","name":"…","code":"…","message":"…"} and
// exit status 1; the library's refusal is the result, not a crash.
import * as client from 'openid-client';

const args = JSON.parse(process.argv[2] ?? '{}');
let stage = 'discovery';

function fail(err) {
  const out = {
    ok: false,
    stage,
    name: err?.name ?? 'Error',
    code: err?.code ?? '',
    message: String(err?.message ?? err),
  };
  // openid-client wraps what oauth4webapi found (a claim missing, an OAuth error answered).
  if (err?.cause?.error) out.oauthError = err.cause.error;
  if (err?.cause?.message) out.cause = `${err.cause.code ?? ''} ${err.cause.message}`.trim();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(1);
}

try {
  // The issuer is plain http on loopback in the tests; the library refuses that unless told.
  const config = await client.discovery(
    new URL(args.issuer),
    args.clientId,
    undefined,
    client.ClientSecretBasic(args.clientSecret),
    { execute: [client.allowInsecureRequests] },
  );

  stage = 'authorization';
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const authURL = client.buildAuthorizationUrl(config, {
    redirect_uri: args.redirectUri,
    scope: args.scope,
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });

  // The device: it follows the provider's redirects until the client's redirect URI, which a
  // browser would load with the code in its query.
  let next = authURL.href;
  let callback;
  for (let hop = 0; hop < 5 && !callback; hop++) {
    const headers = {};
    if (args.number) headers[args.numberHeader] = args.number;
    const resp = await fetch(next, { redirect: 'manual', headers });
    const location = resp.headers.get('location');
    if (resp.status < 300 || resp.status > 399 || !location) {
      throw Object.assign(new Error(`authorization answered ${resp.status}: ${await resp.text()}`), { code: 'AUTHORIZATION_FAILED' });
    }
    next = new URL(location, next).href;
    if (next.startsWith(args.redirectUri)) callback = new URL(next);
  }
  if (!callback) throw Object.assign(new Error(`never reached the redirect URI (last ${next})`), { code: 'AUTHORIZATION_FAILED' });

  stage = 'token';
  const tokens = await client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: verifier,
    expectedState: state,
    expectedNonce: nonce,
    idTokenExpected: true,
  });
  process.stdout.write(JSON.stringify({
    ok: true,
    claims: tokens.claims(),
    accessToken: tokens.access_token,
    scope: tokens.scope ?? '',
    tokenType: tokens.token_type,
    expiresIn: tokens.expiresIn(),
    refreshToken: tokens.refresh_token ?? '',
  }) + '\n');
} catch (err) {
  fail(err);
}
