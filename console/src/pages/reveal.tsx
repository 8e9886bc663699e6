// Reveal: the stuck-plus sessions, a reveal behind step-up with the reason typed first, and the
// audit trail of reveals.
import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { credits, when } from '../format';
import { Cost, usePrices } from '../prices';
import { useIsAdmin } from '../session';
import { Dialog, DialogActions, Field, FormError, Loaded, PageHeader, Pager, TableHead, useAction, useLoad } from '../ui';

export function Reveal() {
  const admin = useIsAdmin();
  const [page, setPage] = useState(0);
  const [rpage, setRpage] = useState(0);
  const sessions = useLoad(
    () => call('GET /v1/api/me/stuck-plus/sessions', () => api.GET('/v1/api/me/stuck-plus/sessions', { params: { query: { page, size: 20 } } })),
    [page],
  );
  const reveals = useLoad(
    () => call('GET /v1/api/me/stuck-plus/reveals', () => api.GET('/v1/api/me/stuck-plus/reveals', { params: { query: { page: rpage, size: 20 } } })),
    [rpage],
  );
  const [target, setTarget] = useState<Schemas['StuckPlusSession'] | null>(null);
  return (
    <>
      <PageHeader title="Reveal" />
      <p class="muted">
        A stuck-plus session holds a number captured for a transaction that never completed. Revealing it needs the ADMIN role, a fresh passkey confirmation and a
        reason; it is audited, and the first reveal of a session is charged.
      </p>
      <section class="panel" aria-labelledby="stuck-title">
        <h2 id="stuck-title">Sessions</h2>
        <Loaded load={sessions} isEmpty={(d) => !d.items?.length} empty="No stuck-plus sessions.">
          {(d) => (
            <>
              <table class="table">
                <TableHead columns={['Captured', 'Number', 'Operator', 'Metadata id', 'Revealed']} actions />
                <tbody>
                  {d.items!.map((s) => (
                    <tr key={s.id}>
                      <td>{when(s.createdAt)}</td>
                      <td>
                        <code>{s.mobileNumberMasked}</code>
                      </td>
                      <td>{s.operatorId}</td>
                      <td>{s.metadataId}</td>
                      <td>{s.revealedAt ? when(s.revealedAt) : 'No'}</td>
                      <td>
                        <button type="button" class="button button-quiet" disabled={!admin} onClick={() => setTarget(s)}>
                          Reveal<span class="visually-hidden"> the number of {s.mobileNumberMasked}</span>
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
              <Pager page={page} totalPages={d.totalPages} onPage={setPage} />
            </>
          )}
        </Loaded>
      </section>
      <section class="panel" aria-labelledby="reveals-title">
        <h2 id="reveals-title">Reveals</h2>
        <Loaded load={reveals} isEmpty={(d) => !d.items?.length} empty="Nothing revealed yet.">
          {(d) => (
            <>
              <table class="table">
                <TableHead columns={['When', 'Session', 'Reason', { label: 'Charged', num: true }]} />
                <tbody>
                  {d.items!.map((r) => (
                    <tr key={r.id}>
                      <td>{when(r.createdAt)}</td>
                      <td>
                        <code>{r.sessionId}</code>
                      </td>
                      <td>{r.reason}</td>
                      <td class="num">{credits(r.charged)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
              <Pager page={rpage} totalPages={d.totalPages} onPage={setRpage} />
            </>
          )}
        </Loaded>
      </section>
      <RevealDialog
        session={target}
        onClose={() => setTarget(null)}
        onDone={() => {
          sessions.reload();
          reveals.reload();
        }}
      />
    </>
  );
}

function RevealDialog({ session, onClose, onDone }: { session: Schemas['StuckPlusSession'] | null; onClose: () => void; onDone: () => void }) {
  const [reason, setReason] = useState('');
  const [result, setResult] = useState<Schemas['RevealStuckPlusSessionResponse'] | null>(null);
  const a = useAction();
  const prices = usePrices();
  const close = () => {
    setReason('');
    setResult(null);
    a.clear();
    onClose();
  };
  return (
    <Dialog title="Reveal the number" open={!!session} onClose={close}>
      {result ? (
        <>
          <p>
            The number: <code class="secret-value">{result.mobileNumber}</code>
          </p>
          <p class="muted">Charged {credits(result.charged)} credits. This reveal is in the audit trail.</p>
          <div class="dialog-actions">
            <button type="button" class="button button-primary" onClick={close}>
              Done
            </button>
          </div>
        </>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void a.run(async () => {
              const r = await call('POST /v1/api/me/stuck-plus/sessions/{sessionId}/reveal', (headers) =>
                api.POST('/v1/api/me/stuck-plus/sessions/{sessionId}/reveal', { params: { path: { sessionId: session!.id } }, body: { reason: reason.trim() }, headers }),
              );
              setResult(r);
              onDone();
            });
          }}
        >
          <p>
            Session of <code>{session?.mobileNumberMasked}</code>.{' '}
            {session?.revealedAt ? (
              <>
                It was revealed before: a repeat is free unless this deployment charges repeats, at <Cost prices={prices} kind="STUCK_PLUS_REVEAL" />.
              </>
            ) : (
              <>
                This first reveal of the session costs <Cost prices={prices} kind="STUCK_PLUS_REVEAL" />, charged to the balance.
              </>
            )}
          </p>
          <Field label="Reason" hint="10 to 500 characters, kept in the audit trail.">
            {(id, d) => (
              <textarea id={id} aria-describedby={d} required minLength={10} maxLength={500} rows={3} value={reason} onInput={(e) => setReason((e.target as HTMLTextAreaElement).value)} />
            )}
          </Field>
          <FormError error={a.error} />
          <DialogActions onCancel={close} busy={a.busy} label="Reveal" busyLabel="Revealing…" />
        </form>
      )}
    </Dialog>
  );
}
