// Generated from src/mnv.js by scripts/build-global.mjs; do not edit.
// mnv browser SDK as a classic script: defines window.Mnv = { MnvError, camaraAuthorizeUrl, camaraCode, capture, checkCode, codeEntry, createSession, network, resendCode, resumeCapture, waitForCode, workflowState }.
(function (global) {
  'use strict';
  // mnv browser SDK: the browser side of mnv's flows. No dependencies, no build step; the
  // classic-script build (dist/mnv.global.js, window.Mnv) is this file wrapped by
  // scripts/build-global.mjs.
  //
  // Retry rule (why it is this narrow): a capture is a POST that consumes its transaction; a
  // second capture of a CAPTURED transaction answers 409 ALREADY_USED. So a request is retried
  // only when the server said it refused before doing any work: 429 or 503 WITH a Retry-After
  // header, waiting that long, at most twice, and only when the wait fits in timeoutMs. A network
  // error is never retried: the browser cannot tell whether the request reached the server.
  // createSession follows the same rule (a retried session would open a second one).

  const SCRIPT_URL = typeof document !== 'undefined' && document.currentScript ? document.currentScript.src : '';

  const DEFAULT_TIMEOUT_MS = 10000;
  const MAX_RETRIES = 2;
  // The gateway serves this file at {prefix}/sdk/v1/mnv.js and the API at {prefix}/v1/api.
  const SERVED_AT = /\/sdk\/v1\/mnv(\.global)?\.js$/;

  class MnvError extends Error {
    constructor(init) {
      super(init.message);
      this.name = 'MnvError';
      this.code = init.code;
      this.httpStatus = init.httpStatus;
      this.requestId = init.requestId;
      this.field = init.field === undefined ? null : init.field;
      // What Retry-After said (429, 503), in milliseconds; null when it said nothing.
      this.retryAfterMs = init.retryAfterMs === undefined ? null : init.retryAfterMs;
      if (init.cause !== undefined) this.cause = init.cause;
    }
  }

  // defaultBaseUrl is the API next to where this script was served from, when it was served by
  // the gateway; a copy bundled into a site cannot tell, so then baseUrl is required.
  function defaultBaseUrl() {
    if (!SCRIPT_URL) return null;
    let u;
    try {
      u = new URL(SCRIPT_URL);
    } catch {
      return null;
    }
    if ((u.protocol !== 'https:' && u.protocol !== 'http:') || !SERVED_AT.test(u.pathname)) return null;
    return u.origin + u.pathname.replace(SERVED_AT, '') + '/v1/api';
  }

  function resolveBaseUrl(baseUrl) {
    const b = baseUrl === undefined || baseUrl === null ? defaultBaseUrl() : baseUrl;
    if (typeof b !== 'string' || b === '') {
      throw new TypeError('mnv: baseUrl is required (e.g. "https://api.example/v1/api"): it cannot be told from where this script was loaded');
    }
    return b.replace(/\/+$/, '');
  }

  function requireString(o, name) {
    if (typeof o[name] !== 'string' || o[name] === '') {
      throw new TypeError('mnv: ' + name + ' is required (a non-empty string)');
    }
  }

  function requireOptions(o) {
    if (o === null || typeof o !== 'object') throw new TypeError('mnv: options object is required');
  }

  // retryAfterMs reads Retry-After: seconds, or an HTTP date; null when absent or unreadable.
  function retryAfterMs(res) {
    const v = res.headers.get('Retry-After');
    if (v === null) return null;
    if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
    const t = Date.parse(v);
    return Number.isNaN(t) ? null : Math.max(0, t - Date.now());
  }

  function isEnvelope(body) {
    return body !== null && typeof body === 'object' && typeof body.success === 'boolean' && Array.isArray(body.messages);
  }

  // request sends one API call under the options' timeout and signal, retrying as the rule at the
  // top says, and resolves to the envelope's data or rejects with an MnvError.
  async function request(o, path, init, rules) {
    const retry = !rules || rules.retry !== false;
    const timeoutMs = o.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : o.timeoutMs;
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0)) throw new TypeError('mnv: timeoutMs must be a positive number');
    const url = resolveBaseUrl(o.baseUrl) + path;
    const signal = o.signal;
    if (signal && signal.aborted) throw aborted(signal.reason);

    const deadline = Date.now() + timeoutMs;
    const ctl = new AbortController();
    let why = null; // 'timeout' or 'aborted', once ctl is aborted
    const stop = (reason) => {
      if (why === null) {
        why = reason;
        ctl.abort();
      }
    };
    const timer = setTimeout(() => stop('timeout'), timeoutMs);
    const onAbort = () => stop('aborted');
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
    const stopped = () => (why === 'timeout' ? timedOut(timeoutMs) : aborted(signal && signal.reason));

    try {
      for (let attempt = 0; ; attempt++) {
        let res, text;
        try {
          res = await fetch(url, { ...init, mode: 'cors', credentials: 'omit', signal: ctl.signal });
          text = await res.text();
        } catch (err) {
          if (why !== null) throw stopped();
          throw new MnvError({ code: 'NETWORK_ERROR', httpStatus: 0, message: 'mnv: the request did not complete (network error, or the server refused this page by CORS)', cause: err });
        }
        const requestId = res.headers.get('X-Request-Id') || undefined;
        let body = null;
        try {
          body = text === '' ? null : JSON.parse(text);
        } catch {
          body = null;
        }
        if (res.ok) {
          if (isEnvelope(body) && body.success === true) return body.data;
          throw badResponse(res, requestId);
        }
        const wait = res.status === 429 || res.status === 503 ? retryAfterMs(res) : null;
        if (retry && wait !== null && attempt < MAX_RETRIES && Date.now() + wait < deadline) {
          await sleep(wait, ctl.signal);
          if (why !== null) throw stopped();
          continue;
        }
        if (!isEnvelope(body) || body.messages.length === 0) throw badResponse(res, requestId);
        const m = body.messages[0] || {};
        throw new MnvError({
          code: typeof m.code === 'string' ? m.code : 'UNKNOWN',
          httpStatus: res.status,
          message: typeof m.message === 'string' ? m.message : 'HTTP ' + res.status,
          requestId,
          field: typeof m.field === 'string' ? m.field : null,
          retryAfterMs: wait,
        });
      }
    } finally {
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', onAbort);
    }
  }

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }

  function timedOut(ms) {
    return new MnvError({ code: 'TIMEOUT', httpStatus: 0, message: 'mnv: no answer within ' + ms + ' ms' });
  }

  function aborted(reason) {
    return new MnvError({ code: 'ABORTED', httpStatus: 0, message: 'mnv: the request was aborted', cause: reason });
  }

  function badResponse(res, requestId) {
    return new MnvError({ code: 'BAD_RESPONSE', httpStatus: res.status, message: 'mnv: the answer (HTTP ' + res.status + ') is not an mnv envelope', requestId });
  }

  // PENDING_KEY names, in the tab's sessionStorage, the capture this tab sent to its operator's
  // authorization: its transaction and the verifier of the code challenge it captured with.
  // resumeCapture completes that one only, with that verifier: a link to the operator lifted
  // from this capture and opened elsewhere completes nothing, nor does a crafted link back here.
  const PENDING_KEY = 'mnv.capture.pending';

  // pageUrl is the page's address without its query and fragment, where the browser comes back
  // to after an operator's authorization (mnv takes no query there: the way back carries a code a
  // redirecting page could pass on); null outside an http(s) page.
  function pageUrl() {
    if (typeof location === 'undefined' || !/^https?:$/.test(location.protocol)) return null;
    return location.href.split('#')[0].split('?')[0];
  }

  function storage() {
    try {
      return typeof sessionStorage === 'undefined' ? null : sessionStorage;
    } catch {
      return null; // a sandboxed frame throws on the mere access
    }
  }

  function base64url(bytes) {
    let s = '';
    for (const b of bytes) s += String.fromCharCode(b);
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  // pkce is a fresh verifier and its S256 challenge; null where the page has no Web Crypto (an
  // insecure context), which an operator's network API then refuses.
  async function pkce() {
    const c = typeof crypto === 'undefined' ? undefined : crypto;
    if (!c || !c.subtle || !c.getRandomValues) return null;
    const verifier = base64url(c.getRandomValues(new Uint8Array(32)));
    const digest = await c.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
    return { verifier, challenge: base64url(new Uint8Array(digest)) };
  }

  // capture captures a browser transaction over the network the browser is on, with no
  // credential: the page's origin must be one the transaction's client allowed.
  //
  // When the operator identifies the line through its network API (NETWORK_API), the capture
  // answers AUTHORIZATION_PENDING with the operator's authorizationUrl: the browser must go there
  // over mobile data, and comes back to returnUrl (default: this page, without its query), where
  // resumeCapture completes it. With redirect 'auto' (the default) capture goes there itself and
  // its promise never settles, as the page is leaving; with 'manual' it resolves to that answer
  // and the page goes when it wants (location.assign(r.authorizationUrl)), in this tab.
  function capture(o) {
    return Promise.resolve().then(async () => {
      requireOptions(o);
      requireString(o, 'transactionId');
      if (o.redirect !== undefined && o.redirect !== 'auto' && o.redirect !== 'manual') {
        throw new TypeError('mnv: redirect must be "auto" or "manual"');
      }
      const headers = {};
      if (o.sandboxNumber !== undefined) headers['X-Mnv-Sandbox-Msisdn'] = o.sandboxNumber;
      const q = new URLSearchParams();
      if (o.operatorId !== undefined && o.operatorId !== null) {
        requireString(o, 'operatorId');
        q.set('operatorId', o.operatorId);
      }
      const back = o.returnUrl !== undefined && o.returnUrl !== null ? o.returnUrl : pageUrl();
      if (back !== null) q.set('returnUrl', back);
      // Only a tab that can keep the verifier can complete an authorization.
      const st = storage();
      const keys = st === null ? null : await pkce();
      if (keys !== null) q.set('codeChallenge', keys.challenge);
      const query = q.toString();
      const path = '/web/transactions/' + encodeURIComponent(o.transactionId) + '/capture' + (query === '' ? '' : '?' + query);
      const r = await request(o, path, { method: 'POST', headers });
      if (r === null || typeof r !== 'object' || r.status !== 'AUTHORIZATION_PENDING' || typeof r.authorizationUrl !== 'string') return r;
      try {
        if (keys !== null) st.setItem(PENDING_KEY, JSON.stringify({ transactionId: o.transactionId, verifier: keys.verifier }));
      } catch {
        // Storage full or refused: resumeCapture will refuse the way back (STATE_MISMATCH).
      }
      if (o.redirect === 'manual' || typeof location === 'undefined') return r;
      location.assign(r.authorizationUrl);
      return new Promise(() => {});
    });
  }

  // resumeCapture completes, on the page the browser came back to after an operator's
  // authorization, the capture this tab started (capture, NETWORK_API): it resolves to what the
  // capture gave, as capture resolves; to null when this page load is no such return. Call it when
  // the page loads. It removes mnv's fragment from the address bar. A return this tab did not
  // start is STATE_MISMATCH; an authorization that could not finish (the operator did not answer)
  // is an MnvError with that code (e.g. UNAVAILABLE), and the transaction can be captured again.
  function resumeCapture(o) {
    return Promise.resolve().then(() => {
      const opts = o === undefined ? {} : o;
      requireOptions(opts);
      const href = opts.url !== undefined ? opts.url : typeof location !== 'undefined' ? location.href : undefined;
      if (typeof href !== 'string') return null;
      const u = new URL(href);
      const f = new URLSearchParams(u.hash.replace(/^#/, ''));
      const id = f.get('mnv_transaction');
      if (id === null || id === '') return null;
      if (opts.url === undefined && typeof history !== 'undefined' && history.replaceState) {
        u.hash = '';
        history.replaceState(history.state, '', u.href);
      }
      const st = storage();
      let pending = null;
      try {
        if (st !== null) {
          const kept = st.getItem(PENDING_KEY);
          st.removeItem(PENDING_KEY); // one way back per capture, whatever it holds
          pending = JSON.parse(kept);
        }
      } catch {
        pending = null;
      }
      if (pending === null || typeof pending !== 'object' || pending.transactionId !== id || typeof pending.verifier !== 'string') {
        throw new MnvError({ code: 'STATE_MISMATCH', httpStatus: 0, message: 'mnv: this tab did not send that transaction to its operator' });
      }
      const error = f.get('mnv_error');
      if (error !== null) {
        throw new MnvError({ code: error, httpStatus: 0, message: "mnv: the operator's authorization did not complete (" + error + '): capture the transaction again' });
      }
      if (f.get('mnv_status') === 'EXPIRED') {
        return { transactionId: id, status: 'EXPIRED', operatorId: null, encryptedMobileNumber: null, expiresAt: null };
      }
      const code = f.get('mnv_code');
      if (code === null || code === '') {
        throw new MnvError({ code: 'BAD_RESPONSE', httpStatus: 0, message: 'mnv: the way back carries no code' });
      }
      return request(opts, '/web/transactions/' + encodeURIComponent(id) + '/complete', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ code, codeVerifier: pending.verifier }),
      });
    });
  }

  // createSession opens an SDK session with an SDK token (webviews, React Native): the answer's
  // encryptedMobileNumber goes to the client's backend, which verifies it with its API key.
  function createSession(o) {
    return Promise.resolve().then(() => {
      requireOptions(o);
      requireString(o, 'sdkToken');
      requireString(o, 'clientId');
      requireString(o, 'platform');
      const body = { platform: o.platform };
      for (const k of ['operatorId', 'deviceId', 'appVersion']) {
        if (o[k] !== undefined && o[k] !== null) body[k] = o[k];
      }
      const headers = { 'Content-Type': 'application/json', 'X-SDK-TOKEN': o.sdkToken, 'X-CLIENT-ID': o.clientId };
      if (o.sandboxNumber !== undefined) headers['X-Mnv-Sandbox-Msisdn'] = o.sandboxNumber;
      return request(o, '/sdk/session', { method: 'POST', headers, body: JSON.stringify(body) });
    });
  }

  // CAMARA_SCOPES are the scopes of the CAMARA Number Verification operations, by short name.
  const CAMARA_SCOPES = {
    verify: 'number-verification:verify',
    share: 'number-verification:device-phone-number:read',
  };

  // camaraAuthorizeUrl is the URL of mnv's CAMARA authorization endpoint for a client: the page
  // sends the browser there (location.assign) over mobile data, where mnv identifies the line, and
  // mnv redirects back to redirectUri with a code for the client's backend, which exchanges it
  // with its client secret at /oauth2/token and calls /number-verification/v2/. issuer defaults
  // to the gateway that served this script.
  function camaraAuthorizeUrl(o) {
    requireOptions(o);
    requireString(o, 'clientId');
    requireString(o, 'redirectUri');
    requireString(o, 'state');
    const scope = CAMARA_SCOPES[o.scope];
    if (scope === undefined) throw new TypeError('mnv: scope must be "verify" or "share"');
    let issuer = o.issuer;
    if (issuer === undefined || issuer === null) {
      const b = defaultBaseUrl();
      issuer = b === null ? null : b.replace(/\/v1\/api$/, '');
    }
    if (typeof issuer !== 'string' || issuer === '') {
      throw new TypeError('mnv: issuer is required (e.g. "https://api.example"): it cannot be told from where this script was loaded');
    }
    const q = new URLSearchParams({
      response_type: 'code', client_id: o.clientId, redirect_uri: o.redirectUri,
      scope: 'openid ' + scope, state: o.state, prompt: 'none',
    });
    if (o.codeChallenge !== undefined) {
      requireString(o, 'codeChallenge');
      q.set('code_challenge', o.codeChallenge);
      q.set('code_challenge_method', 'S256');
    }
    return issuer.replace(/\/+$/, '') + '/oauth2/authorize?' + q.toString();
  }

  // camaraCode reads the code from the page mnv redirected back to (url, default the page's own),
  // after checking that its state is the one the page sent; an error the provider redirected with
  // (e.g. access_denied) is an MnvError with that code.
  function camaraCode(o) {
    requireOptions(o);
    requireString(o, 'state');
    const href = o.url !== undefined ? o.url : typeof location !== 'undefined' ? location.href : undefined;
    if (typeof href !== 'string') throw new TypeError('mnv: url is required outside a browser page');
    const q = new URL(href).searchParams;
    if (q.get('state') !== o.state) {
      throw new MnvError({ code: 'STATE_MISMATCH', httpStatus: 0, message: 'mnv: the redirect\'s state is not the one this page sent' });
    }
    if (q.get('error') !== null) {
      throw new MnvError({ code: q.get('error'), httpStatus: 0, message: 'mnv: authorization refused: ' + (q.get('error_description') || q.get('error')) });
    }
    const code = q.get('code');
    if (code === null || code === '') {
      throw new MnvError({ code: 'BAD_RESPONSE', httpStatus: 0, message: 'mnv: the redirect carries no code' });
    }
    return code;
  }

  // A code when the network cannot tell (verification workflows). A workflow the client's
  // backend started for a browser transaction (POST /v1/api/workflows with its transactionId)
  // moves to a one-time code by SMS when its silent step is UNDETERMINED (Wi-Fi, roaming, another
  // operator). The page then reads, checks and resends on the transaction, with no credential:
  // the routes are bound to the client's web origins like the capture. The attempts, the resend
  // cooldown and its cap are the workflow's, whichever of the page or the backend uses them.

  function transactionPath(o, action) {
    requireOptions(o);
    requireString(o, 'transactionId');
    return '/web/transactions/' + encodeURIComponent(o.transactionId) + '/' + action;
  }

  // FINAL are the workflow statuses that end it: the page stops asking.
  const FINAL = ['VERIFIED', 'NOT_VERIFIED', 'FAILED', 'EXPIRED'];

  // workflowState reads where the transaction's workflow stands: status, reason, channel,
  // codeExpected (a code was sent and is accepted), attemptsLeft, resendsLeft, resendAt,
  // codeExpiresAt. A transaction without a workflow rejects with NOT_FOUND.
  function workflowState(o) {
    return Promise.resolve().then(() => request(o, transactionPath(o, 'workflow'), { method: 'GET' }));
  }

  // waitForCode asks every intervalMs (default 2000) until the workflow expects a code or has
  // ended, and resolves to that state; NOT_FOUND (the backend has not started the workflow yet)
  // is waited out like IN_PROGRESS. It rejects with TIMEOUT after waitMs (default 120000), or
  // ABORTED when signal aborts.
  function waitForCode(o) {
    return Promise.resolve().then(async () => {
      transactionPath(o, 'workflow');
      const every = o.intervalMs === undefined ? 2000 : o.intervalMs;
      const waitMs = o.waitMs === undefined ? 120000 : o.waitMs;
      if (typeof every !== 'number' || !(every > 0)) throw new TypeError('mnv: intervalMs must be a positive number');
      if (typeof waitMs !== 'number' || !(waitMs > 0)) throw new TypeError('mnv: waitMs must be a positive number');
      const until = Date.now() + waitMs;
      for (;;) {
        if (o.signal && o.signal.aborted) throw aborted(o.signal.reason);
        try {
          const w = await workflowState(o);
          if (w && (w.codeExpected === true || FINAL.includes(w.status))) return w;
        } catch (err) {
          if (!(err instanceof MnvError) || err.code !== 'NOT_FOUND') throw err;
        }
        if (Date.now() + every > until) throw timedOut(waitMs);
        await sleep(every, o.signal || new AbortController().signal);
      }
    });
  }

  // checkCode checks the code the user typed: it resolves to { status, reason, attemptsLeft,
  // codeExpiresAt } (a wrong code is IN_PROGRESS with one attempt fewer, or FAILED after the
  // last; VERIFIED when it matched; EXPIRED past its lifetime). A workflow that ended already, or
  // has no code in play, rejects with CONFLICT (409).
  function checkCode(o) {
    return Promise.resolve().then(() => {
      const path = transactionPath(o, 'code');
      requireString(o, 'code');
      return request(o, path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ code: o.code }) });
    });
  }

  // resendCode asks for a new code and resolves to the workflow's new state. Within the cooldown
  // it rejects with RATE_LIMITED (429) and retryAfterMs, never waiting: the page shows the
  // time left (resendAt). Past the cap it rejects with a 409.
  function resendCode(o) {
    return Promise.resolve().then(() =>
      request(o, transactionPath(o, 'resend'), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' }, { retry: false }),
    );
  }

  const CODE_TEXT = {
    label: 'Code sent to your phone by SMS',
    submit: 'Verify',
    resend: 'Send a new code',
    resendIn: (s) => 'Send a new code in ' + s + ' s',
    checking: 'Checking…',
    wrong: (left) => 'That code is not right. ' + left + (left === 1 ? ' attempt' : ' attempts') + ' left.',
    empty: 'Type the code from the SMS.',
    sent: 'A new code is on its way.',
    VERIFIED: 'Your number is verified.',
    FAILED: 'Too many wrong codes: the verification failed.',
    EXPIRED: 'The code expired: start again.',
    NOT_VERIFIED: 'The number could not be verified.',
    error: 'Something went wrong; try again.',
  };

  let entries = 0;

  // codeEntry puts a code field into container (the SDK's default UI): a labelled input with
  // autocomplete="one-time-code" and inputmode="numeric", a Verify button, a resend button that
  // shows its cooldown, and a live region that reads out errors and the outcome. state is what
  // workflowState or waitForCode gave (its attempts and resend time). It returns { form, result,
  // destroy }: result resolves to the final { status, reason } (VERIFIED, FAILED, EXPIRED). text
  // overrides the wording (see CODE_TEXT). The page styles it through the mnv-code classes.
  function codeEntry(o) {
    requireOptions(o);
    requireString(o, 'transactionId');
    if (!o.container || typeof o.container.appendChild !== 'function') throw new TypeError('mnv: container (an element) is required');
    const doc = o.container.ownerDocument;
    const t = { ...CODE_TEXT, ...(o.text || {}) };
    const id = 'mnv-code-' + ++entries;
    const el = (tag, props) => Object.assign(doc.createElement(tag), props);

    const form = el('form', { className: 'mnv-code', noValidate: true });
    const label = el('label', { htmlFor: id, textContent: t.label });
    const input = el('input', { id, name: 'one-time-code', type: 'text', autocomplete: 'one-time-code', inputMode: 'numeric', spellcheck: false });
    input.setAttribute('autocomplete', 'one-time-code');
    input.setAttribute('inputmode', 'numeric');
    input.setAttribute('pattern', '[0-9]*');
    input.setAttribute('maxlength', '32');
    input.setAttribute('aria-describedby', id + '-msg');
    const submit = el('button', { type: 'submit', className: 'mnv-code-submit', textContent: t.submit });
    const resend = el('button', { type: 'button', className: 'mnv-code-resend', textContent: t.resend });
    // role=status is read out politely; an error switches it to alert, read at once.
    const msg = el('p', { id: id + '-msg', className: 'mnv-code-message' });
    msg.setAttribute('role', 'status');
    msg.setAttribute('aria-live', 'polite');
    form.append(label, input, submit, resend, msg);
    o.container.appendChild(form);

    let state = o.state || {};
    let timer = null;
    let finish;
    const result = new Promise((resolve) => (finish = resolve));

    const say = (text, error) => {
      msg.setAttribute('role', error ? 'alert' : 'status');
      msg.className = 'mnv-code-message' + (error ? ' mnv-code-error' : '');
      msg.textContent = text;
      if (error) input.setAttribute('aria-invalid', 'true');
      else input.removeAttribute('aria-invalid');
    };
    const cooldown = () => {
      clearTimeout(timer);
      // No resend left: the button goes, rather than staying disabled with no reason given.
      resend.hidden = state.resendsLeft === 0;
      const at = state.resendAt ? Date.parse(state.resendAt) : NaN;
      const left = Number.isNaN(at) ? 0 : Math.ceil((at - Date.now()) / 1000);
      resend.disabled = resend.hidden || left > 0;
      resend.textContent = left > 0 ? t.resendIn(left) : t.resend;
      if (left > 0) timer = setTimeout(cooldown, 1000);
    };
    const end = (s) => {
      clearTimeout(timer);
      input.disabled = submit.disabled = resend.disabled = true;
      say(t[s.status] || t.error, s.status !== 'VERIFIED');
      form.dataset.status = s.status;
      finish({ status: s.status, reason: s.reason === undefined ? null : s.reason });
    };

    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const code = input.value.replace(/\s+/g, '');
      if (code === '') {
        say(t.empty, true);
        input.focus();
        return;
      }
      submit.disabled = true;
      say(t.checking, false);
      try {
        const r = await checkCode({ ...o, code });
        state = { ...state, ...r };
        if (FINAL.includes(r.status)) return end(r);
        say(t.wrong(r.attemptsLeft), true);
        input.value = '';
        input.focus();
      } catch (err) {
        if (!(err instanceof MnvError) || err.httpStatus !== 409) {
          say(t.error, true);
          return;
        }
        // Ended meanwhile (another tab, the backend, the code's lifetime): say how it ended.
        try {
          state = { ...state, ...(await workflowState(o)) };
          if (FINAL.includes(state.status)) return end(state);
        } catch {
          // fall through to the generic message
        }
        say(t.error, true);
      } finally {
        if (!FINAL.includes(state.status)) submit.disabled = false;
      }
    });
    resend.addEventListener('click', async () => {
      resend.disabled = true;
      try {
        state = { ...state, ...(await resendCode(o)) };
        say(t.sent, false);
        input.focus();
      } catch (err) {
        if (err instanceof MnvError && err.retryAfterMs !== null) state = { ...state, resendAt: new Date(Date.now() + err.retryAfterMs).toISOString() };
        else say(t.error, true);
      }
      cooldown();
    });

    if (FINAL.includes(state.status)) end(state);
    else cooldown();
    return {
      form,
      result,
      destroy() {
        clearTimeout(timer);
        form.remove();
      },
    };
  }

  // network tells what the browser knows of its connection (the Network Information API, where
  // the browser has it), so a page can ask its user to switch from Wi-Fi to mobile data first.
  function network() {
    const c = typeof navigator !== 'undefined' && navigator ? navigator.connection : undefined;
    if (!c) return { type: null, effectiveType: null, cellular: null, wifi: null };
    const type = typeof c.type === 'string' ? c.type : null;
    const known = type !== null && type !== 'unknown';
    return {
      type,
      effectiveType: typeof c.effectiveType === 'string' ? c.effectiveType : null,
      cellular: known ? type === 'cellular' : null,
      wifi: known ? type === 'wifi' : null,
    };
  }

  global.Mnv = Object.freeze({ MnvError, camaraAuthorizeUrl, camaraCode, capture, checkCode, codeEntry, createSession, network, resendCode, resumeCapture, waitForCode, workflowState });
})(typeof window !== 'undefined' ? window : globalThis);
