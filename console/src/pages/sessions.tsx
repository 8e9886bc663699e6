// Sessions: the person's own signed-in sessions, end one, or sign out everywhere.
import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { when } from '../format';
import { base, navigate } from '../router';
import { Badge, Confirm, Loaded, PageHeader, TableHead, useLoad } from '../ui';

export function Sessions() {
  const l = useLoad(() => call('GET /v1/api/console/sessions', () => api.GET('/v1/api/console/sessions')), []);
  const [ending, setEnding] = useState<Schemas['ConsoleSession'] | null>(null);
  const [all, setAll] = useState(false);
  return (
    <>
      <PageHeader title="Sessions">
        <button type="button" class="button button-danger" onClick={() => setAll(true)}>
          Sign out everywhere
        </button>
      </PageHeader>
      <p class="muted">Where you are signed in to the console, this browser included.</p>
      <Loaded load={l} isEmpty={(d) => !d.items?.length} empty="No active sessions.">
        {(d) => (
          <table class="table">
            <TableHead columns={['Browser', 'From', 'Signed in', 'Last seen', 'Expires']} actions />
            <tbody>
              {d.items!.map((s) => (
                <tr key={s.id}>
                  <td>
                    {s.userAgent || 'Unknown'} {s.current && <Badge tone="good">This one</Badge>}
                  </td>
                  <td>{s.clientAddress}</td>
                  <td>{when(s.createdAt)}</td>
                  <td>{when(s.lastSeenAt)}</td>
                  <td>{when(s.expiresAt)}</td>
                  <td>
                    <button type="button" class="button button-quiet" onClick={() => setEnding(s)}>
                      {s.current ? 'Sign out' : 'End'}
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
      <Confirm
        title={ending?.current ? 'Sign out of this browser?' : 'End the session?'}
        open={!!ending}
        confirmLabel={ending?.current ? 'Sign out' : 'End session'}
        onClose={() => setEnding(null)}
        onConfirm={async () => {
          const r = await call('DELETE /v1/api/console/sessions/{sessionId}', () =>
            api.DELETE('/v1/api/console/sessions/{sessionId}', { params: { path: { sessionId: ending!.id } } }),
          );
          if (r.own || ending!.current) navigate(`${base}/sign-in`, true);
          else l.reload();
        }}
      >
        <p>The browser of that session will have to sign in again with a passkey.</p>
      </Confirm>
      <Confirm
        title="Sign out everywhere?"
        open={all}
        confirmLabel="Sign out everywhere"
        onClose={() => setAll(false)}
        onConfirm={async () => {
          await call('POST /v1/api/console/sessions/sign-out-all', () => api.POST('/v1/api/console/sessions/sign-out-all', { body: {} }));
          navigate(`${base}/sign-in`, true);
        }}
      >
        <p>Every session of yours ends, this one included.</p>
      </Confirm>
    </>
  );
}
