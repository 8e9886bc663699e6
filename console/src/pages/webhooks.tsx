// Webhooks: endpoints (create with the events chosen, the signing secret shown once), and one
// endpoint's page: enable or disable, test ping, secret rotation with an overlap, delete, and
// its delivery log with status and redeliver.
import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { when, words } from '../format';
import { navigate } from '../router';
import { useIsAdmin } from '../session';
import { Badge, Confirm, Field, FormError, Loaded, PageHeader, Pager, SecretOnce, TableHead, useAction, useLoad } from '../ui';

const events = [
  'verification.completed',
  'balance.low',
  'balance.expiring',
  'balance.expired',
  'api_key.created',
  'api_key.revoked',
  'api_key.rotated',
  'import.completed',
  'import.failed',
  'stuck_plus.captured',
  'integration.delivery_failed',
  'webhook_endpoint.disabled',
  'verification.step',
  'verification.workflow.completed',
] as const;
type Event = (typeof events)[number];

/** The events to choose (none chosen: every event). */
function EventsField({ chosen, onChange, disabled }: { chosen: Set<Event>; onChange: (s: Set<Event>) => void; disabled: boolean }) {
  return (
    <fieldset class="checks" disabled={disabled}>
      <legend>Events (none chosen: every event)</legend>
      {events.map((ev) => (
        <label key={ev}>
          <input
            type="checkbox"
            checked={chosen.has(ev)}
            onChange={(e) => {
              const next = new Set(chosen);
              if ((e.target as HTMLInputElement).checked) next.add(ev);
              else next.delete(ev);
              onChange(next);
            }}
          />
          <code>{ev}</code>
        </label>
      ))}
    </fieldset>
  );
}

function eventList(e: readonly string[] | undefined): string {
  return !e?.length || e.includes('*') ? 'Every event' : e.join(', ');
}

function deliveryTone(s: unknown): 'good' | 'bad' | 'warn' | 'neutral' {
  const v = String(s ?? '');
  return v.endsWith('SUCCEEDED') ? 'good' : v.endsWith('FAILED') ? 'bad' : v.endsWith('PENDING') ? 'warn' : 'neutral';
}

export function Webhooks() {
  const admin = useIsAdmin();
  const [page, setPage] = useState(0);
  const l = useLoad(() => call('GET /v1/api/me/webhooks', () => api.GET('/v1/api/me/webhooks', { params: { query: { page, size: 20 } } })), [page]);
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [chosen, setChosen] = useState<Set<Event>>(new Set());
  const [secret, setSecret] = useState<string | null>(null);
  const a = useAction();
  return (
    <>
      <PageHeader title="Webhooks" />
      <section class="panel" aria-labelledby="new-webhook">
        <h2 id="new-webhook">Add an endpoint</h2>
        {secret ? (
          <SecretOnce label="The endpoint's signing secret" value={secret} onDone={() => setSecret(null)} />
        ) : (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void a.run(async () => {
                const w = await call('POST /v1/api/me/webhooks', (headers) =>
                  api.POST('/v1/api/me/webhooks', { body: { url: url.trim(), description: description.trim() || null, events: [...chosen] }, headers }),
                );
                setUrl('');
                setDescription('');
                setChosen(new Set());
                setSecret(w.secret ?? null);
                l.reload();
              });
            }}
          >
            <div class="inline-form">
              <Field label="URL" hint="https, where your server receives the events.">
                {(id, d) => <input id={id} aria-describedby={d} type="url" required value={url} disabled={!admin} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} />}
              </Field>
              <Field label="Description">
                {(id) => <input id={id} maxLength={500} value={description} disabled={!admin} onInput={(e) => setDescription((e.target as HTMLInputElement).value)} />}
              </Field>
            </div>
            <EventsField chosen={chosen} onChange={setChosen} disabled={!admin} />
            <button type="submit" class="button button-primary" disabled={!admin || a.busy}>
              Add endpoint
            </button>
            {!admin && <p class="muted">Managing endpoints needs the ADMIN role.</p>}
            <FormError error={a.error} />
          </form>
        )}
      </section>
      <section class="panel" aria-labelledby="endpoints-title">
        <h2 id="endpoints-title">Endpoints</h2>
        <Loaded load={l} isEmpty={(d) => !d.items?.length} empty="No endpoints yet.">
          {(d) => (
            <>
              <table class="table">
                <TableHead columns={['URL', 'Description', 'Events', 'State']} />
                <tbody>
                  {d.items!.map((w) => (
                    <tr key={w.id}>
                      <td>
                        <a href={`/console/webhooks/${encodeURIComponent(w.id)}`}>{w.url}</a>
                      </td>
                      <td>{w.description}</td>
                      <td>{eventList(w.events)}</td>
                      <td>
                        <EndpointState w={w} />
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
    </>
  );
}

function EndpointState({ w }: { w: Schemas['WebhookEndpoint'] }) {
  if (!w.enabled) return <Badge tone="bad">Disabled{w.disabledReason ? ` (${words(String(w.disabledReason))})` : ''}</Badge>;
  if (w.failingSince) return <Badge tone="warn">Failing since {when(w.failingSince)}</Badge>;
  return <Badge tone="good">Enabled</Badge>;
}

export function WebhookDetail({ id }: { id?: string }) {
  const admin = useIsAdmin();
  const webhookId = id!;
  const w = useLoad(() => call('GET /v1/api/me/webhooks/{webhookId}', () => api.GET('/v1/api/me/webhooks/{webhookId}', { params: { path: { webhookId } } })), [webhookId]);
  const [page, setPage] = useState(0);
  const [status, setStatus] = useState('');
  const deliveries = useLoad(
    () =>
      call('GET /v1/api/me/webhooks/{webhookId}/deliveries', () =>
        api.GET('/v1/api/me/webhooks/{webhookId}/deliveries', {
          params: { path: { webhookId }, query: { page, size: 25, status: (status || undefined) as never } },
        }),
      ),
    [webhookId, page, status],
  );
  const [secret, setSecret] = useState<string | null>(null);
  const [deleting, setDeleting] = useState(false);
  const [rotating, setRotating] = useState(false);
  const [overlapHours, setOverlapHours] = useState('24');
  const [note, setNote] = useState('');
  const [editing, setEditing] = useState(false);
  const a = useAction();
  return (
    <>
      <PageHeader title="Webhook endpoint" />
      <p>
        <a href="/console/webhooks">All endpoints</a>
      </p>
      <Loaded load={w}>
        {(d) => (
          <section class="panel" aria-labelledby="endpoint-title">
            <h2 id="endpoint-title">{d.url}</h2>
            <dl class="facts">
              <dt>Description</dt>
              <dd>{d.description || '—'}</dd>
              <dt>Events</dt>
              <dd>{eventList(d.events)}</dd>
              <dt>State</dt>
              <dd>
                <EndpointState w={d} />
              </dd>
              <dt>Previous secret valid until</dt>
              <dd>{when(d.previousSecretExpiresAt)}</dd>
              <dt>Created</dt>
              <dd>{when(d.createdAt)}</dd>
            </dl>
            {secret && <SecretOnce label="The new signing secret" value={secret} onDone={() => setSecret(null)} />}
            {editing && (
              <EditEndpoint
                w={d}
                onDone={(changed) => {
                  setEditing(false);
                  if (changed) w.reload();
                }}
              />
            )}
            <div class="button-row">
              <button
                type="button"
                class="button"
                disabled={!admin || a.busy}
                onClick={() =>
                  a.run(async () => {
                    await call('PATCH /v1/api/me/webhooks/{webhookId}', () =>
                      api.PATCH('/v1/api/me/webhooks/{webhookId}', { params: { path: { webhookId } }, body: { enabled: !d.enabled } }),
                    );
                    w.reload();
                  })
                }
              >
                {d.enabled ? 'Disable' : 'Enable'}
              </button>
              <button
                type="button"
                class="button"
                disabled={!admin || a.busy}
                onClick={() =>
                  a.run(async () => {
                    setNote('');
                    const r = await call('POST /v1/api/me/webhooks/{webhookId}/test', () =>
                      api.POST('/v1/api/me/webhooks/{webhookId}/test', { params: { path: { webhookId } } }),
                    );
                    setNote(`Test event ${r.eventId} queued: it appears in the deliveries below.`);
                    deliveries.reload();
                  })
                }
              >
                Send a test event
              </button>
              <button type="button" class="button" disabled={!admin || a.busy || editing} onClick={() => setEditing(true)}>
                Edit
              </button>
              <button type="button" class="button" disabled={!admin || a.busy} onClick={() => setRotating(true)}>
                Rotate the secret
              </button>
              <button type="button" class="button button-danger" disabled={!admin || a.busy} onClick={() => setDeleting(true)}>
                Delete
              </button>
            </div>
            <FormError error={a.error} />
            <p role="status" class="muted">
              {note}
            </p>
          </section>
        )}
      </Loaded>
      <section class="panel" aria-labelledby="deliveries-title">
        <h2 id="deliveries-title">Deliveries</h2>
        <form class="filters" onSubmit={(e) => e.preventDefault()}>
          <Field label="Status">
            {(fid) => (
              <select
                id={fid}
                value={status}
                onChange={(e) => {
                  setStatus((e.target as HTMLSelectElement).value);
                  setPage(0);
                }}
              >
                <option value="">Any</option>
                {['PENDING', 'SUCCEEDED', 'FAILED', 'CANCELLED'].map((s) => (
                  <option key={s} value={s}>
                    {words(s)}
                  </option>
                ))}
              </select>
            )}
          </Field>
        </form>
        <Loaded load={deliveries} isEmpty={(d) => !d.items?.length} empty="No deliveries.">
          {(d) => (
            <>
              <table class="table">
                <TableHead columns={['When', 'Event', 'Status', 'Attempts', 'Last answer']} actions />
                <tbody>
                  {d.items!.map((x) => (
                    <Delivery key={x.id} d={x} admin={admin} onDone={deliveries.reload} />
                  ))}
                </tbody>
              </table>
              <Pager page={page} totalPages={d.totalPages} onPage={setPage} />
            </>
          )}
        </Loaded>
      </section>
      <Confirm
        title="Rotate the signing secret?"
        open={rotating}
        danger={false}
        confirmLabel="Rotate"
        onClose={() => setRotating(false)}
        onConfirm={async () => {
          const r = await call('POST /v1/api/me/webhooks/{webhookId}/rotate-secret', () =>
            api.POST('/v1/api/me/webhooks/{webhookId}/rotate-secret', {
              params: { path: { webhookId } },
              body: { overlapSeconds: Math.round(Number(overlapHours || '0') * 3600) },
            }),
          );
          setSecret(r.secret ?? null);
          w.reload();
        }}
      >
        <p>Events are signed with the new secret; the previous one also signs them during the overlap, so your server can switch.</p>
        <Field label="Overlap in hours" hint="0 to 168.">
          {(fid, hint) => (
            <input
              id={fid}
              aria-describedby={hint}
              type="number"
              min={0}
              max={168}
              value={overlapHours}
              onInput={(e) => setOverlapHours((e.target as HTMLInputElement).value)}
            />
          )}
        </Field>
      </Confirm>
      <Confirm
        title="Delete the endpoint?"
        open={deleting}
        confirmLabel="Delete"
        onClose={() => setDeleting(false)}
        onConfirm={async () => {
          await call('DELETE /v1/api/me/webhooks/{webhookId}', () => api.DELETE('/v1/api/me/webhooks/{webhookId}', { params: { path: { webhookId } } }));
          navigate('/console/webhooks');
        }}
      >
        <p>No more events are sent to it. This cannot be undone.</p>
      </Confirm>
    </>
  );
}

function EditEndpoint({ w, onDone }: { w: Schemas['WebhookEndpoint']; onDone: (changed: boolean) => void }) {
  const [url, setUrl] = useState(w.url);
  const [description, setDescription] = useState(w.description);
  const [chosen, setChosen] = useState<Set<Event>>(new Set((w.events ?? []).filter((e): e is Event => (events as readonly string[]).includes(e))));
  const a = useAction();
  return (
    <form
      class="panel"
      aria-label="Edit the endpoint"
      onSubmit={(e) => {
        e.preventDefault();
        void a.run(async () => {
          await call('PATCH /v1/api/me/webhooks/{webhookId}', () =>
            api.PATCH('/v1/api/me/webhooks/{webhookId}', {
              params: { path: { webhookId: w.id } },
              // An empty list would leave the events as they are: "*" is every event. A blank
              // description cannot be written, so it is left as it is.
              body: { url: url.trim(), description: description.trim() || null, events: chosen.size ? [...chosen] : ['*'] },
            }),
          );
          onDone(true);
        });
      }}
    >
      <div class="inline-form">
        <Field label="URL">{(id) => <input id={id} type="url" required value={url} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} />}</Field>
        <Field label="Description">
          {(id) => <input id={id} maxLength={500} value={description} onInput={(e) => setDescription((e.target as HTMLInputElement).value)} />}
        </Field>
      </div>
      <EventsField chosen={chosen} onChange={setChosen} disabled={false} />
      <FormError error={a.error} />
      <div class="button-row">
        <button type="submit" class="button button-primary" disabled={a.busy}>
          Save
        </button>
        <button type="button" class="button" onClick={() => onDone(false)} disabled={a.busy}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function Delivery({ d, admin, onDone }: { d: Schemas['WebhookDelivery']; admin: boolean; onDone: () => void }) {
  const a = useAction();
  return (
    <tr>
      <td>{when(d.createdAt)}</td>
      <td>
        <code>{d.eventType}</code>
      </td>
      <td>
        <Badge tone={deliveryTone(d.status)}>{words(String(d.status ?? ''))}</Badge>
      </td>
      <td>{d.attempts}</td>
      <td>
        {d.lastHttpStatus ?? '—'} {d.lastError && <span class="muted">{d.lastError}</span>}
      </td>
      <td>
        <button
          type="button"
          class="button button-quiet"
          disabled={!admin || a.busy}
          onClick={() =>
            a.run(async () => {
              await call('POST /v1/api/me/webhooks/deliveries/{deliveryId}/redeliver', () =>
                api.POST('/v1/api/me/webhooks/deliveries/{deliveryId}/redeliver', { params: { path: { deliveryId: d.id } } }),
              );
              onDone();
            })
          }
        >
          Redeliver<span class="visually-hidden"> {d.eventType}</span>
        </button>
        <FormError error={a.error} />
      </td>
    </tr>
  );
}
