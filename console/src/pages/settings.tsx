// Settings: single sign-on with the client's own OpenID Connect provider (ADMIN).
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, call } from '../api/client';
import { useIsAdmin, useSession } from '../session';
import { Confirm, Field, FormError, Loaded, PageHeader, useAction, useLoad } from '../ui';

const list = (s: string) =>
  s
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);

export function Settings() {
  const admin = useIsAdmin();
  const { session } = useSession();
  const clientId = session.membership?.clientId ?? '';
  const l = useLoad(() => call('GET /v1/api/me/sso', () => api.GET('/v1/api/me/sso')), []);
  const [issuer, setIssuer] = useState('');
  const [oidcClientId, setOidcClientId] = useState('');
  const [secret, setSecret] = useState('');
  const [roleClaim, setRoleClaim] = useState('groups');
  const [adminValues, setAdminValues] = useState('');
  const [memberValues, setMemberValues] = useState('');
  const [scopes, setScopes] = useState('groups');
  const [saved, setSaved] = useState('');
  const [turningOff, setTurningOff] = useState(false);
  const a = useAction();
  useEffect(() => {
    if (l.state !== 'ready' || !l.data.settings) return;
    const s = l.data.settings;
    setIssuer(s.issuer);
    setOidcClientId(s.oidcClientId);
    setRoleClaim(s.roleClaim);
    setAdminValues((s.adminValues ?? []).join(', '));
    setMemberValues((s.memberValues ?? []).join(', '));
    setScopes((s.scopes ?? []).join(', '));
  }, [l.state, l.data]);
  const signInLink = `${location.origin}/console/sign-in?client=${clientId}`;
  return (
    <>
      <PageHeader title="Settings" />
      <Loaded load={l}>
        {(d) => (
          <section class="panel" aria-labelledby="sso-title">
            <h2 id="sso-title">Single sign-on</h2>
            <p class="muted">
              Let your people sign in through your own identity provider (OpenID Connect). Their role is read from a claim at every sign-in; a person
              whose claim gives no role is refused.
            </p>
            <dl class="facts">
              <dt>Redirect URI to register at your provider</dt>
              <dd>
                <code>{d.redirectUri}</code>
              </dd>
              {d.settings && (
                <>
                  <dt>Sign-in link for your people</dt>
                  <dd>
                    <code>{signInLink}</code>
                  </dd>
                </>
              )}
            </dl>
            <form
              onSubmit={(e) => {
                e.preventDefault();
                void a.run(async () => {
                  setSaved('');
                  await call('PUT /v1/api/me/sso', () =>
                    api.PUT('/v1/api/me/sso', {
                      body: {
                        issuer: issuer.trim(),
                        oidcClientId: oidcClientId.trim(),
                        ...(secret ? { clientSecret: secret } : {}),
                        roleClaim: roleClaim.trim(),
                        adminValues: list(adminValues),
                        memberValues: list(memberValues),
                        scopes: list(scopes),
                      },
                    }),
                  );
                  setSecret('');
                  setSaved('Saved.');
                  l.reload();
                });
              }}
            >
              <Field label="Issuer" hint="Your provider's issuer URL (https).">
                {(id, d) => <input id={id} aria-describedby={d} required type="url" maxLength={300} value={issuer} disabled={!admin} onInput={(e) => setIssuer((e.target as HTMLInputElement).value)} />}
              </Field>
              <Field label="Client id" hint="mnv's client id at your provider.">
                {(id, d) => <input id={id} aria-describedby={d} required maxLength={200} value={oidcClientId} disabled={!admin} onInput={(e) => setOidcClientId((e.target as HTMLInputElement).value)} />}
              </Field>
              <Field label="Client secret" hint={d.settings?.hasClientSecret ? 'Kept, never shown. Type a new one to replace it.' : 'Empty for a public client (PKCE alone).'}>
                {(id, d) => (
                  <input id={id} aria-describedby={d} type="password" autoComplete="off" maxLength={500} value={secret} disabled={!admin} onInput={(e) => setSecret((e.target as HTMLInputElement).value)} />
                )}
              </Field>
              <Field label="Role claim" hint="The ID token's claim that holds groups or roles.">
                {(id, d) => <input id={id} aria-describedby={d} required maxLength={100} value={roleClaim} disabled={!admin} onInput={(e) => setRoleClaim((e.target as HTMLInputElement).value)} />}
              </Field>
              <Field label="Values that make an ADMIN" hint="Comma-separated.">
                {(id, d) => <input id={id} aria-describedby={d} value={adminValues} disabled={!admin} onInput={(e) => setAdminValues((e.target as HTMLInputElement).value)} />}
              </Field>
              <Field label="Values that make a MEMBER" hint="Comma-separated.">
                {(id, d) => <input id={id} aria-describedby={d} value={memberValues} disabled={!admin} onInput={(e) => setMemberValues((e.target as HTMLInputElement).value)} />}
              </Field>
              <Field label="Extra scopes" hint="Comma-separated; what your provider needs to put the claim in the token.">
                {(id, d) => <input id={id} aria-describedby={d} value={scopes} disabled={!admin} onInput={(e) => setScopes((e.target as HTMLInputElement).value)} />}
              </Field>
              <FormError error={a.error} />
              <div class="inline-form">
                <button type="submit" class="button button-primary" disabled={!admin || a.busy}>
                  Save
                </button>
                {d.settings && (
                  <button type="button" class="button button-danger" disabled={!admin || a.busy} onClick={() => setTurningOff(true)}>
                    Turn off
                  </button>
                )}
              </div>
              <p role="status" class="muted">
                {saved}
              </p>
            </form>
            {!admin && <p class="muted">Changing single sign-on needs the ADMIN role.</p>}
          </section>
        )}
      </Loaded>
      <Confirm
        title="Turn single sign-on off?"
        open={turningOff}
        confirmLabel="Turn off"
        onClose={() => setTurningOff(false)}
        onConfirm={async () => {
          try {
            await call('DELETE /v1/api/me/sso', () => api.DELETE('/v1/api/me/sso'));
          } catch (e) {
            if (!(e instanceof ApiError && e.status === 404)) throw e;
          }
          l.reload();
        }}
      >
        <p>The people who signed in through your provider lose their sessions at once.</p>
      </Confirm>
    </>
  );
}
