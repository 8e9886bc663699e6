// Verifications: the history with filters (outcome, dates), masked numbers, one's detail.
import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { credits, when, words } from '../format';
import { Badge, Field, Loaded, PageHeader, Pager, useLoad } from '../ui';

type Status = NonNullable<Schemas['Verification']['status']>;
const statuses = ['VERIFIED', 'NOT_VERIFIED', 'UNDETERMINED', 'EXPIRED'] as const;

function tone(s: unknown): 'good' | 'bad' | 'warn' | 'neutral' {
  const v = String(s ?? '');
  return v.endsWith('NOT_VERIFIED') ? 'bad' : v.endsWith('VERIFIED') ? 'good' : v.endsWith('EXPIRED') ? 'warn' : 'neutral';
}

/** A date input's value (YYYY-MM-DD, the person's day) as the start of that day in UTC ISO. */
function dayStart(d: string): string | undefined {
  return d ? new Date(d + 'T00:00:00').toISOString() : undefined;
}

export function Verifications() {
  const [page, setPage] = useState(0);
  const [status, setStatus] = useState<'' | (typeof statuses)[number]>('');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const list = useLoad(() => {
    // "to" is exclusive: the day after the chosen last day.
    const toIso = to ? new Date(new Date(to + 'T00:00:00').getTime() + 86400000).toISOString() : undefined;
    return call('GET /v1/api/verifications', () =>
      api.GET('/v1/api/verifications', { params: { query: { page, size: 25, status: status || undefined, from: dayStart(from), to: toIso } } }),
    );
  }, [page, status, from, to]);
  return (
    <>
      <PageHeader title="Verifications" />
      <form class="filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <Field label="Outcome">
          {(id) => (
            <select
              id={id}
              value={status}
              onChange={(e) => {
                setStatus((e.target as HTMLSelectElement).value as typeof status);
                setPage(0);
              }}
            >
              <option value="">Any</option>
              {statuses.map((s) => (
                <option key={s} value={s}>
                  {words(s)}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="From">
          {(id) => (
            <input
              id={id}
              type="date"
              value={from}
              onChange={(e) => {
                setFrom((e.target as HTMLInputElement).value);
                setPage(0);
              }}
            />
          )}
        </Field>
        <Field label="To (inclusive)">
          {(id) => (
            <input
              id={id}
              type="date"
              value={to}
              onChange={(e) => {
                setTo((e.target as HTMLInputElement).value);
                setPage(0);
              }}
            />
          )}
        </Field>
      </form>
      <Loaded load={list} isEmpty={(l) => !l.items?.length} empty="No verifications match.">
        {(l) => (
          <>
            <p class="muted">{l.totalItems} in all</p>
            <table class="table">
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Number</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Reason</th>
                  <th scope="col">Operator</th>
                  <th scope="col" class="num">
                    Charged
                  </th>
                </tr>
              </thead>
              <tbody>
                {l.items!.map((v) => (
                  <tr key={v.verificationId}>
                    <td>
                      <a href={`/console/verifications/${encodeURIComponent(v.verificationId)}`}>{when(v.createdAt)}</a>
                    </td>
                    <td>
                      <code>{v.mobileNumber}</code>
                    </td>
                    <td>
                      <Badge tone={tone(v.status)}>{words(String(v.status ?? ''))}</Badge>
                    </td>
                    <td>{v.reason ? words(v.reason) : '—'}</td>
                    <td>{v.operatorId || '—'}</td>
                    <td class="num">{credits(v.charged)}</td>
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

export function VerificationDetail({ id }: { id?: string }) {
  const v = useLoad(
    () => call('GET /v1/api/verifications/{verificationId}', () => api.GET('/v1/api/verifications/{verificationId}', { params: { path: { verificationId: id! } } })),
    [id],
  );
  return (
    <>
      <PageHeader title="Verification" />
      <p>
        <a href="/console/verifications">All verifications</a>
      </p>
      <Loaded load={v}>
        {(d) => (
          <dl class="facts panel">
            <dt>Id</dt>
            <dd>
              <code>{d.verificationId}</code>
            </dd>
            <dt>When</dt>
            <dd>{when(d.createdAt)}</dd>
            <dt>Number</dt>
            <dd>
              <code>{d.mobileNumber}</code>
            </dd>
            <dt>Outcome</dt>
            <dd>
              <Badge tone={tone(d.status as Status)}>{words(String(d.status ?? ''))}</Badge>
            </dd>
            <dt>Reason</dt>
            <dd>{d.reason ? words(d.reason) : '—'}</dd>
            <dt>Operator</dt>
            <dd>{d.operatorId || '—'}</dd>
            <dt>Service</dt>
            <dd>{words(d.serviceType)}</dd>
            <dt>Session</dt>
            <dd>
              <code>{d.sessionId || '—'}</code>
            </dd>
            <dt>Charged</dt>
            <dd>{credits(d.charged)} credits</dd>
            <dt>Balance after</dt>
            <dd>{credits(d.balanceAfter)}</dd>
          </dl>
        )}
      </Loaded>
    </>
  );
}
