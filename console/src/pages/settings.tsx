// Settings: the low-balance threshold (the balance.low event and the overview's warning) and
// single sign-on with the client's own OpenID Connect provider, and the workflow policy; all
// changed by an ADMIN.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, call, type Schemas } from '../api/client';
import { credits } from '../format';
import { useIsAdmin, useSession } from '../session';
import { Confirm, Field, FormError, Loaded, PageHeader, useAction, useLoad } from '../ui';
import { WorkflowPolicy } from './workflow-policy';

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
      <LowBalance />
      <WorkflowPolicy />
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

/** The client's low-balance threshold: its own, or the service's default when unset. */
function LowBalance() {
  const admin = useIsAdmin();
  const l = useLoad(() => call('GET /v1/api/me/low-balance-threshold', () => api.GET('/v1/api/me/low-balance-threshold')), []);
  const [saved, setSaved] = useState('');
  return (
    <section class="panel" aria-labelledby="low-balance-title">
      <h2 id="low-balance-title">Low-balance threshold</h2>
      <p class="muted">
        When a paid call takes the balance below this many credits, mnv sends the <code>balance.low</code> event once, and the overview warns. 0 sends none.
      </p>
      <Loaded load={l}>
        {(t) => (
          <LowBalanceForm
            key={String(t.threshold)}
            current={t}
            admin={admin}
            onSaving={() => setSaved('')}
            onSaved={(r) => {
              setSaved(`Saved: balance.low below ${credits(r.effectiveThreshold)} credits${r.threshold == null ? " (the service's default)" : ''}.`);
              l.reload();
            }}
          />
        )}
      </Loaded>
      <p role="status" class="muted">
        {saved}
      </p>
    </section>
  );
}

type Threshold = Schemas['LowBalanceThreshold'];

function LowBalanceForm({ current, admin, onSaving, onSaved }: { current: Threshold; admin: boolean; onSaving: () => void; onSaved: (t: Threshold) => void }) {
  const [own, setOwn] = useState(current.threshold != null);
  const [value, setValue] = useState(String(current.threshold ?? current.defaultThreshold));
  const a = useAction();
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        void a.run(async () => {
          onSaving();
          onSaved(
            await call('PUT /v1/api/me/low-balance-threshold', () =>
              api.PUT('/v1/api/me/low-balance-threshold', { body: own ? { threshold: Number(value) } : { threshold: null } }),
            ),
          );
        });
      }}
    >
      <dl class="facts">
        <dt>Applies now</dt>
        <dd>
          {current.effectiveThreshold === 0 ? 'None: no balance.low' : `${credits(current.effectiveThreshold)} credits`}
          {current.threshold == null ? " (the service's default)" : ''}
        </dd>
        <dt>The service's default</dt>
        <dd>{credits(current.defaultThreshold)} credits</dd>
      </dl>
      <fieldset class="choice" disabled={!admin || a.busy}>
        <legend>Threshold</legend>
        <label>
          <input type="radio" name="low-balance-own" checked={!own} onChange={() => setOwn(false)} /> The service's default
        </label>
        <label>
          <input type="radio" name="low-balance-own" checked={own} onChange={() => setOwn(true)} /> Our own
        </label>
      </fieldset>
      {own && (
        <Field label="Credits" hint="A whole number; 0 for no balance.low at all.">
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              type="number"
              inputMode="numeric"
              required
              min={0}
              max={1000000000000}
              step={1}
              value={value}
              disabled={!admin}
              onInput={(e) => setValue((e.target as HTMLInputElement).value)}
            />
          )}
        </Field>
      )}
      <FormError error={a.error} />
      <div class="inline-form">
        <button type="submit" class="button button-primary" disabled={!admin || a.busy}>
          Save threshold
        </button>
      </div>
      {!admin && <p class="muted">Changing the threshold needs the ADMIN role.</p>}
    </form>
  );
}
