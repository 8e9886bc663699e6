// Sign in with a passkey: the server's options, the browser's assertion, the session cookie.
import { useEffect, useRef } from 'preact/hooks';
import { api, ApiError, call } from '../api/client';
import { getPasskey } from '../api/webauthn';
import { base, navigate } from '../router';
import { FormError, useAction } from '../ui';

/** Where to go once signed in: ?next= when it is a page of the console, else the overview. */
function nextPage(): string {
  const next = new URLSearchParams(location.search).get('next') ?? '';
  return /^\/console(\/[\w\-/]*)?$/.test(next) ? next : base;
}

/** The client whose single sign-on the link names (?client=), if any. */
function ssoClient(): string {
  const c = new URLSearchParams(location.search).get('client') ?? '';
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(c) ? c : '';
}

export function SignIn() {
  const a = useAction();
  const sso = useAction();
  const client = ssoClient();
  const ssoFailed = new URLSearchParams(location.search).get('sso') === 'failed';
  const h = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = 'Sign in · mnv console';
    h.current?.focus({ preventScroll: true });
  }, []);
  const error =
    a.error instanceof ApiError && a.error.status === 401
      ? new Error('That passkey is not registered for this console, or the sign-in expired. Try again, or ask an ADMIN of your client for an invitation.')
      : a.error;
  return (
    <main id="main" class="centered">
      <section class="card narrow" aria-labelledby="sign-in-title">
        <p class="brand brand-large">
          mnv <span>console</span>
        </p>
        <h1 id="sign-in-title" ref={h} tabIndex={-1}>
          Sign in
        </h1>
        <p>Use the passkey you created when you accepted your invitation. There is no password.</p>
        <FormError error={error} />
        <button
          type="button"
          class="button button-primary button-wide"
          disabled={a.busy}
          onClick={() =>
            a.run(async () => {
              const o = await call('POST /v1/api/console/sign-in/options', () => api.POST('/v1/api/console/sign-in/options', { body: {} }), {
                signedOut: false,
              });
              const credentialJson = await getPasskey(o.optionsJson);
              await call('POST /v1/api/console/sign-in', () => api.POST('/v1/api/console/sign-in', { body: { ceremonyId: o.ceremonyId, credentialJson } }), {
                signedOut: false,
              });
              navigate(nextPage(), true);
            })
          }
        >
          {a.busy ? 'Waiting for your passkey…' : 'Sign in with a passkey'}
        </button>
        {ssoFailed && (
          <p class="state state-error" role="alert">
            Single sign-on did not complete. Try again, or ask an ADMIN of your client to check its settings.
          </p>
        )}
        {client && (
          <>
            <FormError error={sso.error} />
            <button
              type="button"
              class="button button-wide"
              disabled={sso.busy}
              onClick={() =>
                sso.run(async () => {
                  const s = await call('POST /v1/api/console/sso/start', () => api.POST('/v1/api/console/sso/start', { body: { clientId: client } }), {
                    signedOut: false,
                  });
                  location.assign(s.authorizationUrl);
                })
              }
            >
              {sso.busy ? 'Going to your organisation…' : 'Sign in with your organisation (single sign-on)'}
            </button>
          </>
        )}
        <p class="muted small">New here? Open the invitation link an ADMIN of your client sent you.</p>
      </section>
    </main>
  );
}
