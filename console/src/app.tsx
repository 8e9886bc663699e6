// The console: the pages before sign-in (sign-in, an invitation), and the shell around every
// page after it, which reads the session (401: to sign-in).
import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, call, onSignedOut, onStepUpRequired } from './api/client';
import { getPasskey } from './api/webauthn';
import { base, match, navigate, onLinkClick, usePath } from './router';
import { SessionContext, useSession, type Session } from './session';
import { Dialog, DialogActions, ErrorBox, FormError, Loading, useAction } from './ui';
import { SignIn } from './pages/sign-in';
import { Invite } from './pages/invite';
import { Overview } from './pages/overview';
import { Keys } from './pages/keys';
import { Verifications, VerificationDetail } from './pages/verifications';
import { Workflows, WorkflowDetail } from './pages/workflows';
import { WebOrigins } from './pages/web-origins';
import { Webhooks, WebhookDetail } from './pages/webhooks';
import { Ledger } from './pages/ledger';
import { Team } from './pages/team';
import { Sessions } from './pages/sessions';
import { Passkeys } from './pages/passkeys';
import { AuditLog } from './pages/audit-log';
import { Settings } from './pages/settings';
import { Reveal } from './pages/reveal';
import { Connect } from './pages/connect';
import { SandboxSms } from './pages/sandbox-sms';
import { NotFound } from './pages/not-found';

interface Route {
  path: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  page: ComponentType<any>;
  nav?: string;
}

const routes: Route[] = [
  { path: '/console', page: Overview, nav: 'Overview' },
  { path: '/console/verifications', page: Verifications, nav: 'Verifications' },
  { path: '/console/verifications/:id', page: VerificationDetail },
  { path: '/console/workflows', page: Workflows, nav: 'Workflows' },
  { path: '/console/workflows/:id', page: WorkflowDetail },
  { path: '/console/keys', page: Keys, nav: 'Keys and SDK tokens' },
  { path: '/console/web-origins', page: WebOrigins, nav: 'Web origins' },
  { path: '/console/webhooks', page: Webhooks, nav: 'Webhooks' },
  { path: '/console/webhooks/:id', page: WebhookDetail },
  { path: '/console/connect', page: Connect, nav: 'Connect' },
  { path: '/console/reveal', page: Reveal, nav: 'Reveal' },
  { path: '/console/sandbox-sms', page: SandboxSms, nav: 'Sandbox SMS' },
  { path: '/console/ledger', page: Ledger, nav: 'Ledger' },
  { path: '/console/team', page: Team, nav: 'Team' },
  { path: '/console/passkeys', page: Passkeys, nav: 'Your passkeys' },
  { path: '/console/sessions', page: Sessions, nav: 'Sessions' },
  { path: '/console/audit-log', page: AuditLog, nav: 'Audit log' },
  { path: '/console/settings', page: Settings, nav: 'Settings' },
];

export function App() {
  const path = usePath().replace(/\/+$/, '') || base;
  useEffect(() => {
    document.addEventListener('click', onLinkClick);
    // Back to the page the person was on once signed in again.
    onSignedOut(() => {
      const here = location.pathname;
      navigate(`${base}/sign-in` + (here.startsWith(base) && !here.startsWith(`${base}/sign-in`) ? `?next=${encodeURIComponent(here)}` : ''), true);
    });
    return () => document.removeEventListener('click', onLinkClick);
  }, []);
  if (path === `${base}/sign-in`) return <SignIn />;
  if (path === `${base}/invite`) return <Invite />;
  return <Shell path={path} />;
}

function Shell({ path }: { path: string }) {
  const [session, setSession] = useState<Session | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    call('GET /v1/api/console/session', () => api.GET('/v1/api/console/session')).then(
      (s) => {
        setSession(s);
        setError(null);
      },
      (e: Error) => setError(e),
    );
  }, [tick]);

  if (!session) {
    return (
      <main id="main" class="centered">
        {error ? <ErrorBox error={error} onRetry={() => setTick((t) => t + 1)} /> : <Loading what="Opening the console" />}
      </main>
    );
  }
  let page = <NotFound />;
  for (const r of routes) {
    const params = match(r.path, path);
    if (params) {
      const P = r.page;
      page = <P {...params} />;
      break;
    }
  }
  return (
    <SessionContext.Provider value={{ session, refresh: () => setTick((t) => t + 1) }}>
      {/* The router takes same-origin links, so the skip link moves the focus itself: a
          fragment alone would leave it on the link. */}
      <a
        class="skip-link"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        Skip to the content
      </a>
      <Header session={session} onSwitched={() => setTick((t) => t + 1)} />
      <div class="layout">
        <nav class="sidebar" aria-label="Console">
          <ul>
            {routes
              .filter((r) => r.nav)
              .map((r) => {
                const here = r.path === base ? path === base : path === r.path || path.startsWith(r.path + '/');
                return (
                  <li key={r.path}>
                    <a href={r.path} aria-current={here ? 'page' : undefined}>
                      {r.nav}
                    </a>
                  </li>
                );
              })}
          </ul>
        </nav>
        {/* Keyed by the client: after a switch every page loads its data again. */}
        <main id="main" class="content" tabIndex={-1} key={session.membership?.clientId}>
          {new URLSearchParams(location.search).get('step-up') === 'failed' && (
            <p class="state state-error" role="alert">
              Signing in again at your organisation did not complete: nothing was confirmed. Try the action again.
            </p>
          )}
          {page}
        </main>
      </div>
      <StepUp />
    </SessionContext.Provider>
  );
}

function Header({ session, onSwitched }: { session: Session; onSwitched: () => void }) {
  const sw = useAction();
  const out = useAction();
  const m = session.membership;
  const others = session.memberships ?? [];
  return (
    <header class="topbar">
      <a class="brand" href={base}>
        mnv <span>console</span>
      </a>
      <div class="topbar-client">
        {others.length > 1 ? (
          <label class="switcher">
            <span class="visually-hidden">Client</span>
            <select
              value={m?.clientId}
              disabled={sw.busy}
              onChange={(e) =>
                sw.run(async () => {
                  const clientId = (e.target as HTMLSelectElement).value;
                  await call('POST /v1/api/console/session/switch', () => api.POST('/v1/api/console/session/switch', { body: { clientId } }));
                  navigate(base);
                  onSwitched();
                })
              }
            >
              {others.map((o) => (
                <option key={o.clientId} value={o.clientId}>
                  {o.clientName}
                </option>
              ))}
            </select>
          </label>
        ) : (
          <span class="client-name">{m?.clientName}</span>
        )}
        <FormError error={sw.error} />
      </div>
      <div class="topbar-person">
        <span>
          {session.person?.name || session.person?.email}
          <span class="muted"> · {m?.role ? String(m.role).replace(/^ROLE_/, '').toLowerCase() : ''}</span>
        </span>
        <button
          type="button"
          class="button button-quiet"
          disabled={out.busy}
          onClick={() =>
            out.run(async () => {
              await call('POST /v1/api/console/session/sign-out', () => api.POST('/v1/api/console/session/sign-out', { body: {} }));
              navigate(`${base}/sign-in`, true);
            })
          }
        >
          Sign out
        </button>
        <FormError error={out.error} />
      </div>
    </header>
  );
}

/**
 * The step-up prompt: an action answered 403 STEP_UP_REQUIRED asks the person to confirm with
 * their passkey (a button, so the browser sees a gesture), then the API wrapper retries it once.
 * A person of the client's single sign-on has no passkey: they confirm at their organisation's
 * provider, which the browser leaves for and comes back from to this page (with ?step-up=failed
 * when it was refused); they then do the action again.
 */
function StepUp() {
  const [pending, setPending] = useState<{ resolve: () => void; reject: (e: Error) => void } | null>(null);
  const a = useAction();
  const sso = !!useSession().session.singleSignOn;
  useEffect(() => {
    onStepUpRequired(() => new Promise<void>((resolve, reject) => setPending({ resolve, reject })));
  }, []);
  const cancel = () => {
    pending?.reject(new Error('The action needs a fresh passkey confirmation, which was cancelled.'));
    setPending(null);
    a.clear();
  };
  if (sso) {
    return (
      <Dialog title="Confirm it is you" open={!!pending} onClose={cancel}>
        <p>This action needs you to sign in again at your organisation. You come back to this page, then do the action again.</p>
        <FormError error={a.error} />
        <DialogActions
          onCancel={cancel}
          busy={a.busy}
          label="Sign in again at my organisation"
          busyLabel="Going to your organisation…"
          onAction={() =>
            a.run(async () => {
              const s = await call(
                'POST /v1/api/console/step-up/sso',
                () => api.POST('/v1/api/console/step-up/sso', { body: { returnTo: location.pathname } }),
                { stepUp: false },
              );
              location.assign(s.authorizationUrl);
            })
          }
        />
      </Dialog>
    );
  }
  return (
    <Dialog title="Confirm it is you" open={!!pending} onClose={cancel}>
      <p>This action needs a fresh confirmation with your passkey.</p>
      <FormError error={a.error} />
      <DialogActions
        onCancel={cancel}
        busy={a.busy}
        label="Use my passkey"
        busyLabel="Waiting for the passkey…"
        onAction={() =>
          a.run(async () => {
            const o = await call('POST /v1/api/console/step-up/options', () => api.POST('/v1/api/console/step-up/options', { body: {} }), {
              stepUp: false,
            });
            const credentialJson = await getPasskey(o.optionsJson);
            await call('POST /v1/api/console/step-up', () => api.POST('/v1/api/console/step-up', { body: { ceremonyId: o.ceremonyId, credentialJson } }), {
              stepUp: false,
            });
            pending?.resolve();
            setPending(null);
          })
        }
      />
    </Dialog>
  );
}
