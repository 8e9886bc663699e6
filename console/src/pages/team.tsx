// Team: the members and their roles, invitations (the link shown once), pending invitations.
import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { roleName, when, words } from '../format';
import { useIsAdmin, useSession } from '../session';
import { Confirm, Field, FormError, Loaded, PageHeader, SecretOnce, TableHead, useAction, useLoad } from '../ui';

type RoleName = 'ADMIN' | 'MEMBER';

export function Team() {
  const admin = useIsAdmin();
  const me = useSession().session.person?.id;
  const members = useLoad(() => call('GET /v1/api/me/members', () => api.GET('/v1/api/me/members')), []);
  const invitations = useLoad(() => call('GET /v1/api/me/invitations', () => api.GET('/v1/api/me/invitations')), []);
  const [removing, setRemoving] = useState<Schemas['Member'] | null>(null);
  const [revoking, setRevoking] = useState<Schemas['Invitation'] | null>(null);
  const [link, setLink] = useState<string | null>(null);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<RoleName>('MEMBER');
  const invite = useAction();
  const change = useAction();
  return (
    <>
      <PageHeader title="Team" />
      {!admin && <p class="muted">Inviting, changing roles and removing members need the ADMIN role.</p>}
      <section class="panel" aria-labelledby="members-title">
        <h2 id="members-title">Members</h2>
        <FormError error={change.error} />
        <Loaded load={members} isEmpty={(d) => !d.items?.length} empty="No members.">
          {(d) => (
            <table class="table">
              <TableHead columns={['Name', 'E-mail', 'Role', 'Joined']} actions />
              <tbody>
                {d.items!.map((m) => {
                  const name = m.person?.name || m.person?.email || '';
                  return (
                    <tr key={m.person?.id}>
                      <td>
                        {m.person?.name || '—'}
                        {m.person?.id === me && <span class="muted"> (you)</span>}
                      </td>
                      <td>{m.person?.email}</td>
                      <td>
                        <label>
                          <span class="visually-hidden">Role of {name}</span>
                          <select
                            value={roleName(String(m.role ?? ''))}
                            disabled={!admin || change.busy}
                            onChange={(e) =>
                              change.run(async () => {
                                const r = (e.target as HTMLSelectElement).value as RoleName;
                                try {
                                  await call('PUT /v1/api/me/members/{userId}/role', () =>
                                    api.PUT('/v1/api/me/members/{userId}/role', { params: { path: { userId: m.person!.id } }, body: { role: r } }),
                                  );
                                } finally {
                                  members.reload();
                                }
                              })
                            }
                          >
                            <option value="MEMBER">Member</option>
                            <option value="ADMIN">Admin</option>
                          </select>
                        </label>
                      </td>
                      <td>{when(m.joinedAt)}</td>
                      <td>
                        <button type="button" class="button button-quiet" disabled={!admin} onClick={() => setRemoving(m)}>
                          Remove<span class="visually-hidden"> {name}</span>
                        </button>
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          )}
        </Loaded>
      </section>
      <section class="panel" aria-labelledby="invite-title">
        <h2 id="invite-title">Invite a person</h2>
        {link ? (
          <SecretOnce label="The invitation link" value={link} onDone={() => setLink(null)} />
        ) : (
          <form
            class="inline-form"
            onSubmit={(e) => {
              e.preventDefault();
              void invite.run(async () => {
                const r = await call('POST /v1/api/me/invitations', (headers) => api.POST('/v1/api/me/invitations', { body: { email: email.trim(), role }, headers }));
                setEmail('');
                setLink(r.link);
                invitations.reload();
              });
            }}
          >
            <Field label="E-mail">
              {(id) => <input id={id} type="email" required value={email} disabled={!admin} autoComplete="off" onInput={(e) => setEmail((e.target as HTMLInputElement).value)} />}
            </Field>
            <Field label="Role">
              {(id) => (
                <select id={id} value={role} disabled={!admin} onChange={(e) => setRole((e.target as HTMLSelectElement).value as RoleName)}>
                  <option value="MEMBER">Member</option>
                  <option value="ADMIN">Admin</option>
                </select>
              )}
            </Field>
            <button type="submit" class="button button-primary" disabled={!admin || invite.busy}>
              Invite
            </button>
          </form>
        )}
        <FormError error={invite.error} />
        <p class="muted">The link works once, until it expires. Send it to the person yourself.</p>
      </section>
      <section class="panel" aria-labelledby="pending-title">
        <h2 id="pending-title">Pending invitations</h2>
        <Loaded load={invitations} isEmpty={(d) => !d.items?.length} empty="No pending invitations.">
          {(d) => (
            <table class="table">
              <TableHead columns={['E-mail', 'Role', 'Sent', 'Expires']} actions />
              <tbody>
                {d.items!.map((i) => (
                  <tr key={i.id}>
                    <td>
                      {i.email}
                      {i.recovery && <span class="muted"> (recovery)</span>}
                    </td>
                    <td>{words(String(i.role ?? ''))}</td>
                    <td>{when(i.createdAt)}</td>
                    <td>{when(i.expiresAt)}</td>
                    <td>
                      <button type="button" class="button button-quiet" disabled={!admin} onClick={() => setRevoking(i)}>
                        Revoke<span class="visually-hidden"> the invitation of {i.email}</span>
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </Loaded>
      </section>
      <Confirm
        title="Remove the member?"
        open={!!removing}
        confirmLabel="Remove"
        onClose={() => setRemoving(null)}
        onConfirm={async () => {
          await call('DELETE /v1/api/me/members/{userId}', () => api.DELETE('/v1/api/me/members/{userId}', { params: { path: { userId: removing!.person!.id } } }));
          members.reload();
        }}
      >
        <p>
          <strong>{removing?.person?.name || removing?.person?.email}</strong> loses access to this client at once; their sessions end.
        </p>
      </Confirm>
      <Confirm
        title="Revoke the invitation?"
        open={!!revoking}
        confirmLabel="Revoke"
        onClose={() => setRevoking(null)}
        onConfirm={async () => {
          await call('DELETE /v1/api/me/invitations/{invitationId}', () =>
            api.DELETE('/v1/api/me/invitations/{invitationId}', { params: { path: { invitationId: revoking!.id } } }),
          );
          invitations.reload();
        }}
      >
        <p>The link sent to {revoking?.email} stops working.</p>
      </Confirm>
    </>
  );
}
