// Connect: the overview indicators, profiles (masked numbers, search, enrich), imports (the
// sample CSV, an upload with its progress and per-row errors, the job list) and integrations
// (sync, sync history).
import { useEffect, useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { count, when, words } from '../format';
import { Cost, usePrices } from '../prices';
import { useIsAdmin } from '../session';
import { Badge, Confirm, Field, FormError, Loaded, PageHeader, Pager, SecretOnce, TableHead, useAction, useLoad } from '../ui';

export function Connect() {
  const overview = useLoad(() => call('GET /v1/api/me/connect/overview', () => api.GET('/v1/api/me/connect/overview')), []);
  return (
    <>
      <PageHeader title="Connect" />
      <section class="panel" aria-labelledby="connect-overview">
        <h2 id="connect-overview">At a glance</h2>
        <Loaded load={overview}>
          {(o) => (
            <dl class="stats">
              <div>
                <dt>Profiles</dt>
                <dd class="stat">{o.profiles?.total ?? 0}</dd>
              </div>
              <div>
                <dt>Matched</dt>
                <dd class="stat">{o.profiles?.matched ?? 0}</dd>
              </div>
              <div>
                <dt>Enriched</dt>
                <dd class="stat">{o.profiles?.enriched ?? 0}</dd>
              </div>
              <div>
                <dt>Imports running</dt>
                <dd class="stat">{o.imports?.running ?? 0}</dd>
              </div>
              <div>
                <dt>Active integrations</dt>
                <dd class="stat">
                  {o.integrations?.active ?? 0} of {o.integrations?.total ?? 0}
                </dd>
              </div>
              <div>
                <dt>Syncs, last 24 h</dt>
                <dd class="stat">
                  {o.syncs?.last24h?.succeeded ?? 0} ok, {o.syncs?.last24h?.failed ?? 0} failed
                </dd>
              </div>
            </dl>
          )}
        </Loaded>
      </section>
      <Profiles />
      <Imports />
      <Integrations />
    </>
  );
}

function Profiles() {
  const [page, setPage] = useState(0);
  const [search, setSearch] = useState('');
  const [q, setQ] = useState('');
  const [matched, setMatched] = useState('');
  const l = useLoad(
    () =>
      call('GET /v1/api/me/connect/profiles', () =>
        api.GET('/v1/api/me/connect/profiles', { params: { query: { page, size: 20, search: q || undefined, matched: matched === '' ? undefined : matched === 'yes' } } }),
      ),
    [page, q, matched],
  );
  const [enriching, setEnriching] = useState<Schemas['Profile'] | null>(null);
  const [reason, setReason] = useState('');
  const prices = usePrices();
  return (
    <section class="panel" aria-labelledby="profiles-title">
      <h2 id="profiles-title">Profiles</h2>
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setQ(search.trim());
          setPage(0);
        }}
      >
        <Field label="Search">{(id) => <input id={id} type="search" value={search} onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />}</Field>
        <Field label="Matched">
          {(id) => (
            <select
              id={id}
              value={matched}
              onChange={(e) => {
                setMatched((e.target as HTMLSelectElement).value);
                setPage(0);
              }}
            >
              <option value="">Any</option>
              <option value="yes">Matched</option>
              <option value="no">Not matched</option>
            </select>
          )}
        </Field>
        <button type="submit" class="button">
          Search
        </button>
      </form>
      <Loaded load={l} isEmpty={(d) => !d.items?.length} empty={q ? 'No profile matches.' : 'No profiles yet: import a CSV below.'}>
        {(d) => (
          <>
            <table class="table">
              <TableHead columns={['Name', 'Number', 'External id', 'Matched', 'Enrichment']} actions />
              <tbody>
                {d.items!.map((p) => (
                  <tr key={p.id}>
                    <td>{[p.firstName, p.lastName].filter(Boolean).join(' ') || '—'}</td>
                    <td>
                      <code>{p.mobileNumberMasked}</code>
                    </td>
                    <td>{p.externalId ?? '—'}</td>
                    <td>{p.matched ? <Badge tone="good">Matched</Badge> : <Badge>No</Badge>}</td>
                    <td>{p.enrichment ? `${p.enrichment.carrier ?? ''} ${p.enrichment.lineType}`.trim() : '—'}</td>
                    <td>
                      <button type="button" class="button button-quiet" onClick={() => setEnriching(p)}>
                        Enrich<span class="visually-hidden"> {p.mobileNumberMasked}</span>
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
      <Confirm
        title="Enrich the profile?"
        open={!!enriching}
        danger={false}
        confirmLabel="Enrich and charge"
        onClose={() => {
          setEnriching(null);
          setReason('');
        }}
        onConfirm={async () => {
          await call('POST /v1/api/me/connect/profiles/{profileId}/enrich', (headers) =>
            api.POST('/v1/api/me/connect/profiles/{profileId}/enrich', { params: { path: { profileId: enriching!.id } }, body: { reason: reason.trim() }, headers }),
          );
          l.reload();
        }}
      >
        <p>
          Enriching <code>{enriching?.mobileNumberMasked}</code> costs <Cost prices={prices} kind="CONNECT_ENRICHMENT" />, charged to the balance.
        </p>
        <Field label="Reason" hint="3 to 500 characters.">
          {(id, d) => <input id={id} aria-describedby={d} minLength={3} maxLength={500} value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />}
        </Field>
      </Confirm>
    </section>
  );
}

function Imports() {
  const [page, setPage] = useState(0);
  const l = useLoad(
    () => call('GET /v1/api/me/connect/import/jobs', () => api.GET('/v1/api/me/connect/import/jobs', { params: { query: { page, size: 10 } } })),
    [page],
  );
  const a = useAction();
  const [drag, setDrag] = useState(false);
  // Live progress: while a job runs, the list is read again every 2 seconds.
  const running = l.state === 'ready' && (l.data.items ?? []).some((j) => /QUEUED|RUNNING|PENDING/.test(String(j.status ?? '')));
  useEffect(() => {
    if (!running) return;
    const t = setInterval(l.reload, 2000);
    return () => clearInterval(t);
  }, [running, l.reload]);
  const upload = (file: File) =>
    a.run(async () => {
      await call('POST /v1/api/me/connect/import', () =>
        api.POST('/v1/api/me/connect/import', {
          body: file as never,
          bodySerializer: (b: unknown) => b as File,
          headers: { 'Content-Type': 'text/csv' },
        }),
      );
      l.reload();
    });
  return (
    <section class="panel" aria-labelledby="imports-title">
      <h2 id="imports-title">Imports</h2>
      <p>
        <a href="/v1/api/me/connect/import/sample.csv" download="sample.csv">
          Download the sample CSV
        </a>
      </p>
      <div
        class={drag ? 'dropzone dropzone-active' : 'dropzone'}
        onDragOver={(e) => {
          e.preventDefault();
          setDrag(true);
        }}
        onDragLeave={() => setDrag(false)}
        onDrop={(e) => {
          e.preventDefault();
          setDrag(false);
          const f = e.dataTransfer?.files[0];
          if (f) void upload(f);
        }}
      >
        <Field label="Upload a CSV (or drop it here)" hint="Up to 50 MiB, with the sample's header.">
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              type="file"
              accept=".csv,text/csv"
              disabled={a.busy}
              onChange={(e) => {
                const f = (e.target as HTMLInputElement).files?.[0];
                if (f) void upload(f);
                (e.target as HTMLInputElement).value = '';
              }}
            />
          )}
        </Field>
        {a.busy && <p role="status">Uploading…</p>}
        <FormError error={a.error} />
      </div>
      <Loaded load={l} isEmpty={(d) => !d.items?.length} empty="No imports yet.">
        {(d) => (
          <>
            <ul class="jobs">
              {d.items!.map((j) => (
                <Job key={j.id} j={j} />
              ))}
            </ul>
            <Pager page={page} totalPages={d.totalPages} onPage={setPage} />
          </>
        )}
      </Loaded>
    </section>
  );
}

function Job({ j }: { j: Schemas['ImportJob'] }) {
  return (
    <li class="job">
      <div class="job-head">
        <strong>{j.fileName}</strong> <Badge tone={String(j.status).endsWith('FAILED') ? 'bad' : String(j.status).endsWith('COMPLETED') ? 'good' : 'warn'}>{words(String(j.status ?? ''))}</Badge>
        <span class="muted"> {when(j.createdAt)}</span>
      </div>
      <progress max={100} value={j.percentComplete}>
        {Math.round(j.percentComplete)}%
      </progress>
      <p class="muted small">
        {count(j.importedRows, 'row', 'rows')} imported, {j.updatedRows} updated, {j.failedRows} failed of {j.totalRows}
        {j.failure ? ` — ${j.failure}` : ''}
      </p>
      {j.errors?.length ? (
        <details>
          <summary>{count(j.errors.length, 'row error', 'row errors')}</summary>
          <ul>
            {j.errors.map((e, i) => (
              <li key={i}>
                Row {e.row}, {e.column}: {e.message}
              </li>
            ))}
          </ul>
        </details>
      ) : null}
    </li>
  );
}

const triggers = ['PROFILE_CREATED', 'PROFILE_MATCHED', 'PROFILE_ENRICHED', 'IMPORT_COMPLETED', 'MANUAL'] as const;

/** "profile field = target name" lines into the API's field mappings. */
export function parseMappings(text: string): Record<string, string> {
  const m: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const [from, to] = line.split('=').map((x) => x.trim());
    if (from && to) m[from] = to;
  }
  return m;
}

function NewIntegration({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const [endpointUrl, setEndpointUrl] = useState('');
  const [httpMethod, setHttpMethod] = useState<'POST' | 'PUT' | 'PATCH'>('POST');
  const [trigger, setTrigger] = useState<(typeof triggers)[number]>('PROFILE_MATCHED');
  const [key, setKey] = useState('');
  const [matchedOnly, setMatchedOnly] = useState(true);
  const [mappings, setMappings] = useState('mobileNumber = phone\nfirstName = first_name\nlastName = last_name');
  const [secret, setSecret] = useState<string | null>(null);
  const a = useAction();
  if (secret) return <SecretOnce label="The integration's signing secret (Standard Webhooks)" value={secret} onDone={() => setSecret(null)} />;
  return (
    <form
      aria-label="New integration"
      onSubmit={(e) => {
        e.preventDefault();
        void a.run(async () => {
          const r = await call('POST /v1/api/me/connect/integrations', (headers) =>
            api.POST('/v1/api/me/connect/integrations', {
              body: {
                displayName: name.trim(),
                integrationType: 'WEBHOOK',
                endpointUrl: endpointUrl.trim(),
                httpMethod,
                triggerEvent: trigger,
                apiKey: key || null,
                matchedOnly,
                fieldMappings: parseMappings(mappings),
              },
              headers,
            }),
          );
          // The CRM key is never shown again; only the signing secret is, this once.
          setKey('');
          setName('');
          setEndpointUrl('');
          setSecret(r.webhookSecret ?? r.signingSecret ?? null);
          onCreated();
        });
      }}
    >
      <div class="inline-form">
        <Field label="Name">{(id) => <input id={id} required maxLength={100} value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />}</Field>
        <Field label="Endpoint URL" hint="https only.">
          {(id, d) => (
            <input id={id} aria-describedby={d} type="url" required pattern="https://.+" value={endpointUrl} onInput={(e) => setEndpointUrl((e.target as HTMLInputElement).value)} />
          )}
        </Field>
        <Field label="Method">
          {(id) => (
            <select id={id} value={httpMethod} onChange={(e) => setHttpMethod((e.target as HTMLSelectElement).value as typeof httpMethod)}>
              <option>POST</option>
              <option>PUT</option>
              <option>PATCH</option>
            </select>
          )}
        </Field>
        <Field label="When">
          {(id) => (
            <select id={id} value={trigger} onChange={(e) => setTrigger((e.target as HTMLSelectElement).value as typeof trigger)}>
              {triggers.map((t) => (
                <option key={t} value={t}>
                  {words(t)}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="The CRM's API key" hint="Sent as a Bearer token; stored encrypted and never shown again.">
          {(id, d) => (
            <input id={id} aria-describedby={d} type="password" autoComplete="off" maxLength={4096} value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} />
          )}
        </Field>
      </div>
      <Field label="Field mappings" hint="One per line: profile field = name in the CRM's record.">
        {(id, d) => <textarea id={id} aria-describedby={d} rows={4} required value={mappings} onInput={(e) => setMappings((e.target as HTMLTextAreaElement).value)} />}
      </Field>
      <label class="check">
        <input type="checkbox" checked={matchedOnly} onChange={(e) => setMatchedOnly((e.target as HTMLInputElement).checked)} /> Matched profiles only
      </label>
      <FormError error={a.error} />
      <button type="submit" class="button button-primary" disabled={a.busy}>
        Create integration
      </button>
    </form>
  );
}

function Integrations() {
  const admin = useIsAdmin();
  const l = useLoad(() => call('GET /v1/api/me/connect/integrations', () => api.GET('/v1/api/me/connect/integrations', { params: { query: { page: 0, size: 50 } } })), []);
  const [open, setOpen] = useState<string | null>(null);
  const [adding, setAdding] = useState(false);
  const [deleting, setDeleting] = useState<Schemas['Integration'] | null>(null);
  const toggle = useAction();
  return (
    <section class="panel" aria-labelledby="integrations-title">
      <h2 id="integrations-title">Integrations</h2>
      {adding ? (
        <NewIntegration onCreated={l.reload} />
      ) : (
        <button type="button" class="button" disabled={!admin} onClick={() => setAdding(true)}>
          New integration
        </button>
      )}
      <FormError error={toggle.error} />
      <Loaded load={l} isEmpty={(d) => !d.items?.length} empty="No integrations yet.">
        {(d) => (
          <ul class="jobs">
            {d.items!.map((i) => (
              <li key={i.id} class="job">
                <div class="job-head">
                  <strong>{i.displayName}</strong> <Badge tone={String(i.status).endsWith('ACTIVE') ? 'good' : 'neutral'}>{words(String(i.status ?? ''))}</Badge>
                  <span class="muted">
                    {' '}
                    {i.integrationType} → {i.endpointUrl}
                  </span>
                </div>
                <div class="button-row">
                  <SyncButton id={i.id} admin={admin} />
                  <button
                    type="button"
                    class="button"
                    disabled={!admin || toggle.busy}
                    onClick={() =>
                      toggle.run(async () => {
                        await call('PATCH /v1/api/me/connect/integrations/{integrationId}', () =>
                          api.PATCH('/v1/api/me/connect/integrations/{integrationId}', {
                            params: { path: { integrationId: i.id } },
                            body: { status: String(i.status).endsWith('ACTIVE') ? 'PAUSED' : 'ACTIVE' },
                          }),
                        );
                        l.reload();
                      })
                    }
                  >
                    {String(i.status).endsWith('ACTIVE') ? 'Pause' : 'Resume'}
                  </button>
                  <button type="button" class="button button-quiet" disabled={!admin} onClick={() => setDeleting(i)}>
                    Delete<span class="visually-hidden"> {i.displayName}</span>
                  </button>
                  <button type="button" class="button button-quiet" aria-expanded={open === i.id} onClick={() => setOpen(open === i.id ? null : i.id)}>
                    Sync history
                  </button>
                </div>
                {open === i.id && <SyncHistory id={i.id} />}
              </li>
            ))}
          </ul>
        )}
      </Loaded>
      <Confirm
        title="Delete the integration?"
        open={!!deleting}
        confirmLabel="Delete"
        onClose={() => setDeleting(null)}
        onConfirm={async () => {
          await call('DELETE /v1/api/me/connect/integrations/{integrationId}', () =>
            api.DELETE('/v1/api/me/connect/integrations/{integrationId}', { params: { path: { integrationId: deleting!.id } } }),
          );
          l.reload();
        }}
      >
        <p>
          <strong>{deleting?.displayName}</strong> stops delivering to {deleting?.endpointUrl}. This cannot be undone.
        </p>
      </Confirm>
    </section>
  );
}

function SyncButton({ id, admin }: { id: string; admin: boolean }) {
  const a = useAction();
  const [note, setNote] = useState('');
  return (
    <>
      <button
        type="button"
        class="button"
        disabled={!admin || a.busy}
        onClick={() =>
          a.run(async () => {
            const r = await call('POST /v1/api/me/connect/integrations/{integrationId}/sync', () =>
              api.POST('/v1/api/me/connect/integrations/{integrationId}/sync', { params: { path: { integrationId: id } } }),
            );
            setNote(`${count(r.queuedRecords, 'record', 'records')} queued.`);
          })
        }
      >
        Sync now
      </button>
      <span role="status" class="muted">
        {note}
      </span>
      <FormError error={a.error} />
    </>
  );
}

function SyncHistory({ id }: { id: string }) {
  const l = useLoad(
    () =>
      call('GET /v1/api/me/connect/integrations/{integrationId}/sync-history', () =>
        api.GET('/v1/api/me/connect/integrations/{integrationId}/sync-history', { params: { path: { integrationId: id }, query: { page: 0, size: 20 } } }),
      ),
    [id],
  );
  return (
    <Loaded load={l} isEmpty={(d) => !d.items?.length} empty="No syncs yet.">
      {(d) => (
        <ol class="timeline">
          {d.items!.map((s) => (
            <li key={s.id}>
              <Badge tone={String(s.status).endsWith('SUCCEEDED') ? 'good' : String(s.status).endsWith('FAILED') ? 'bad' : 'warn'}>{words(String(s.status ?? ''))}</Badge>{' '}
              {when(s.startedAt)} · {count(s.recordCount, 'record', 'records')} · {s.trigger}
              {s.httpStatus ? ` · HTTP ${s.httpStatus}` : ''} {s.error && <span class="muted">{s.error}</span>}
            </li>
          ))}
        </ol>
      )}
    </Loaded>
  );
}
