// Workflows: the verification workflows (silent check, then a code by SMS) with filters by
// status, channel and country, masked numbers, and one's steps as a timeline: which channel
// decided, why, and what each step was charged (docs/architecture.md, "Verification workflows").
import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import type { operations } from '../api/schema';
import { credits, when, words } from '../format';
import { Badge, Field, Loaded, PageHeader, Pager, useLoad } from '../ui';

type Query = NonNullable<operations['ListWorkflows']['parameters']['query']>;
// Held to the API's values by the generated types (a value the API drops fails make console-check).
const statuses = ['IN_PROGRESS', 'VERIFIED', 'NOT_VERIFIED', 'FAILED', 'EXPIRED'] as const satisfies readonly NonNullable<Query['status']>[];
export const channels = ['SILENT', 'SMS_OTP'] as const satisfies readonly NonNullable<Query['channel']>[];
export const channelNames: Record<string, string> = { SILENT: 'Silent network check', SMS_OTP: 'Code by SMS' };

export function tone(s: unknown): 'good' | 'bad' | 'warn' | 'neutral' {
  const v = String(s ?? '');
  if (v === 'VERIFIED' || v === 'DELIVERED' || v === 'SENT') return 'good';
  if (v === 'NOT_VERIFIED' || v === 'FAILED' || v === 'UNDELIVERABLE' || v === 'BLOCKED' || v === 'REJECTED') return 'bad';
  if (v === 'EXPIRED' || v === 'TIMED_OUT' || v === 'UNDETERMINED') return 'warn';
  return 'neutral';
}

function Select<T extends string>({ label, value, values, names, onChange }: { label: string; value: '' | T; values: readonly T[]; names?: Record<string, string>; onChange: (v: '' | T) => void }) {
  return (
    <Field label={label}>
      {(id) => (
        <select id={id} value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value as '' | T)}>
          <option value="">Any</option>
          {values.map((v) => (
            <option key={v} value={v}>
              {names?.[v] ?? words(v)}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

/** The channels a workflow took, in order, as words. */
function path(w: Schemas['Workflow']): string {
  return (w.steps ?? []).map((s) => channelNames[s.channel] ?? words(s.channel)).join(' → ') || '—';
}

export function Workflows() {
  const [page, setPage] = useState(0);
  const [status, setStatus] = useState<'' | (typeof statuses)[number]>('');
  const [channel, setChannel] = useState<'' | (typeof channels)[number]>('');
  const [country, setCountry] = useState('');
  const countryQuery = /^[A-Za-z]{2}$/.test(country) ? country.toUpperCase() : undefined;
  const list = useLoad(
    () =>
      call('GET /v1/api/workflows', () =>
        api.GET('/v1/api/workflows', { params: { query: { page, size: 25, status: status || undefined, channel: channel || undefined, country: countryQuery } } }),
      ),
    [page, status, channel, countryQuery],
  );
  return (
    <>
      <PageHeader title="Workflows" />
      <p class="muted">
        A workflow verifies a number with the channels of your <a href="/console/settings#workflow-policy">workflow policy</a>, in order, until one decides.
      </p>
      <form class="filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <Select
          label="Status"
          value={status}
          values={statuses}
          onChange={(v) => {
            setStatus(v);
            setPage(0);
          }}
        />
        <Select
          label="Channel"
          value={channel}
          values={channels}
          names={channelNames}
          onChange={(v) => {
            setChannel(v);
            setPage(0);
          }}
        />
        <Field label="Country" hint="Two letters, such as GB.">
          {(id, d) => (
            <input
              id={id}
              aria-describedby={d}
              size={4}
              maxLength={2}
              autoComplete="off"
              value={country}
              onInput={(e) => {
                setCountry((e.target as HTMLInputElement).value.trim());
                setPage(0);
              }}
            />
          )}
        </Field>
      </form>
      <Loaded load={list} isEmpty={(l) => !l.items?.length} empty="No workflows match.">
        {(l) => (
          <>
            <p class="muted">{l.totalItems} in all</p>
            <table class="table">
              <thead>
                <tr>
                  <th scope="col">Started</th>
                  <th scope="col">Number</th>
                  <th scope="col">Country</th>
                  <th scope="col">Status</th>
                  <th scope="col">Decided by</th>
                  <th scope="col">Channels</th>
                  <th scope="col" class="num">
                    Charged
                  </th>
                </tr>
              </thead>
              <tbody>
                {l.items!.map((w) => (
                  <tr key={w.workflowId}>
                    <td>
                      <a href={`/console/workflows/${encodeURIComponent(w.workflowId)}`}>{when(w.createdAt)}</a>
                    </td>
                    <td>
                      <code>{w.mobileNumber}</code>
                    </td>
                    <td>{w.country || '—'}</td>
                    <td>
                      <Badge tone={tone(w.status)}>{words(w.status)}</Badge>
                    </td>
                    <td>{w.decidedBy ? (channelNames[w.decidedBy] ?? words(w.decidedBy)) : '—'}</td>
                    <td>{path(w)}</td>
                    <td class="num">{credits(w.charged)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <Pager page={page} totalPages={l.totalPages} onPage={setPage} />
          </>
        )}
      </Loaded>
    </>
  );
}

export function WorkflowDetail({ id }: { id?: string }) {
  const w = useLoad(() => call('GET /v1/api/workflows/{workflowId}', () => api.GET('/v1/api/workflows/{workflowId}', { params: { path: { workflowId: id! } } })), [id]);
  return (
    <>
      <PageHeader title="Workflow" />
      <p>
        <a href="/console/workflows">All workflows</a>
      </p>
      <Loaded load={w}>
        {(d) => (
          <>
            <dl class="facts panel">
              <dt>Id</dt>
              <dd>
                <code>{d.workflowId}</code>
              </dd>
              <dt>Started</dt>
              <dd>{when(d.createdAt)}</dd>
              <dt>Number</dt>
              <dd>
                <code>{d.mobileNumber}</code>
              </dd>
              <dt>Country</dt>
              <dd>{d.country || '—'}</dd>
              <dt>Status</dt>
              <dd>
                <Badge tone={tone(d.status)}>{words(d.status)}</Badge>
              </dd>
              <dt>Decided by</dt>
              <dd>{d.decidedBy ? `${channelNames[d.decidedBy] ?? words(d.decidedBy)}${d.reason ? ` (${words(d.reason)})` : ''}` : d.reason ? words(d.reason) : 'Not decided yet'}</dd>
              <dt>SIM swap</dt>
              <dd>{words(d.simSwap)}</dd>
              <dt>Device swap</dt>
              <dd>{words(d.deviceSwap)}</dd>
              <dt>Charged</dt>
              <dd>{credits(d.charged)} credits</dd>
              <dt>Ended</dt>
              <dd>{d.endedAt ? when(d.endedAt) : '—'}</dd>
            </dl>
            <section class="panel" aria-labelledby="steps-title">
              <h2 id="steps-title">Steps</h2>
              <ol class="timeline">
                {(d.steps ?? []).map((s) => {
                  const decided = d.decidedBy === s.channel && s.status === d.status;
                  return (
                    <li key={s.stepId}>
                      <strong>{channelNames[s.channel] ?? words(s.channel)}</strong> <Badge tone={tone(s.status)}>{words(s.status)}</Badge>
                      {decided && <> — decided the workflow</>}
                      <br />
                      <span class="muted">
                        {when(s.startedAt)}
                        {s.endedAt ? ` to ${when(s.endedAt)}` : ', open'}
                        {s.reason ? ` · ${words(s.reason)}` : ''} · {credits(s.charged)} credits
                        {s.verificationId && (
                          <>
                            {' · '}
                            <a href={`/console/verifications/${encodeURIComponent(s.verificationId)}`}>its verification</a>
                          </>
                        )}
                      </span>
                    </li>
                  );
                })}
              </ol>
            </section>
          </>
        )}
      </Loaded>
    </>
  );
}
