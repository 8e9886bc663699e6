// An invitation: /console/invite#<token>. The token stays in the fragment, so it never reaches
// a server log or a Referer; the page posts it to open the invitation, then creates a passkey.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, call, type Schemas } from '../api/client';
import { createPasskey, getPasskey } from '../api/webauthn';
import { words } from '../format';
import { base, navigate } from '../router';
import { Field, FormError, Loading, useAction } from '../ui';

export function Invite() {
  const [token] = useState(() => decodeURIComponent(location.hash.slice(1)));
  const [opened, setOpened] = useState<Schemas['StartInvitationResponse'] | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [name, setName] = useState('');
  const a = useAction();

  useEffect(() => {
    document.title = 'Accept an invitation · mnv console';
    // Keep the token out of the address bar once read (and so out of screenshots and history).
    history.replaceState(null, '', location.pathname);
    if (!token) {
      setError(new Error('This link has no invitation in it. Open the whole link you were sent.'));
      return;
    }
    call('POST /v1/api/console/invitations/open', () => api.POST('/v1/api/console/invitations/open', { body: { token } }), { signedOut: false }).then(
      setOpened,
      (e: Error) => setError(explain(e)),
    );
  }, [token]);

  return (
    <main id="main" class="centered">
      <section class="card narrow" aria-labelledby="invite-title">
        <p class="brand brand-large">
          mnv <span>console</span>
        </p>
        <h1 id="invite-title">Accept an invitation</h1>
        {error ? (
          <div class="state state-error" role="alert">
            <p>{error.message}</p>
            <p>
              <a href={`${base}/sign-in`}>Go to sign-in</a>
            </p>
          </div>
        ) : !opened ? (
          <Loading what="Opening the invitation" />
        ) : (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void a.run(async () => {
                // A ceremony is single-use: open the invitation again for a new one after a failure.
                const o = a.error
                  ? await call('POST /v1/api/console/invitations/open', () => api.POST('/v1/api/console/invitations/open', { body: { token } }), {
                      signedOut: false,
                    })
                  : opened;
                // A person who exists proves one of their passkeys; a new one creates theirs.
                const credentialJson = o.existingPerson ? await getPasskey(o.optionsJson) : await createPasskey(o.optionsJson);
                try {
                  await call(
                    'POST /v1/api/console/invitations/accept',
                    () => api.POST('/v1/api/console/invitations/accept', { body: { token, ceremonyId: o.ceremonyId, credentialJson, name: name.trim() || null } }),
                    { signedOut: false },
                  );
                } catch (e) {
                  throw explain(e as Error);
                }
                navigate(base, true);
              });
            }}
          >
            <dl class="facts">
              <dt>Client</dt>
              <dd>{opened.clientName}</dd>
              <dt>E-mail</dt>
              <dd>{opened.email}</dd>
              <dt>Role</dt>
              <dd>{words(String(opened.role ?? ''))}</dd>
            </dl>
            {opened.recovery && <p class="notice">This is a recovery invitation: it adds a new passkey to your existing account.</p>}
            {opened.existingPerson ? (
              <p class="notice">You already have a passkey for this console: confirm with it to join {opened.clientName}.</p>
            ) : (
              <Field label="Your name" hint="As your team will see it. Optional.">
                {(id, d) => <input id={id} aria-describedby={d} value={name} maxLength={100} autoComplete="name" onInput={(e) => setName((e.target as HTMLInputElement).value)} />}
              </Field>
            )}
            <FormError error={a.error} />
            <button type="submit" class="button button-primary button-wide" disabled={a.busy}>
              {a.busy ? 'Waiting for your passkey…' : opened.existingPerson ? 'Join with my passkey' : 'Create passkey'}
            </button>
          </form>
        )}
      </section>
    </main>
  );
}

function explain(e: Error): Error {
  if (e instanceof ApiError && [401, 404, 409, 410].includes(e.status)) {
    return new Error('This invitation has expired, was already used or was revoked. Ask an ADMIN of your client for a new one.');
  }
  return e;
}
