// Verifications: the history with filters (outcome, reason, operator, method, dates), masked
// numbers, one's detail.
import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import type { operations } from '../api/schema';
import { credits, when, words } from '../format';
import { Badge, Field, Loaded, PageHeader, Pager, TableHead, useLoad } from '../ui';

type Status = NonNullable<Schemas['Verification']['status']>;
type Query = NonNullable<operations['ListVerifications']['parameters']['query']>;
const statuses = ['VERIFIED', 'NOT_VERIFIED', 'UNDETERMINED', 'EXPIRED'] as const;
// The values the list filters on, held to the API's by the generated types (a value the API
// drops fails make console-check).
const reasons = [
  'NUMBER_MATCH',
  'NUMBER_MISMATCH',
  'NO_NETWORK_IDENTITY',
  'SESSION_EXPIRED',
  'TOKEN_EXPIRED',
  'USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK',
  'OPERATOR_REFUSED',
  'NUMBER_SHARED',
] as const satisfies readonly NonNullable<Query['reason']>[];
const methods = ['HEADER_ENRICHMENT', 'NETWORK_API'] as const satisfies readonly NonNullable<Query['serviceType']>[];

/** A filter's select: "Any" (no filter) and the values, shown as words. */
function Choice<T extends string>({ label, value, values, names, onChange }: { label: string; value: '' | T; values: readonly T[]; names?: Record<string, string>; onChange: (v: '' | T) => void }) {
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
  const [reason, setReason] = useState<'' | (typeof reasons)[number]>('');
  const [operator, setOperator] = useState('');
  const [method, setMethod] = useState<'' | (typeof methods)[number]>('');
  const operators = useLoad(() => call('GET /v1/api/operators', () => api.GET('/v1/api/operators')), []);
  const operatorIds = operators.state === 'ready' ? (operators.data.items ?? []).map((o) => o.id) : [];
  const operatorNames = Object.fromEntries(operators.state === 'ready' ? (operators.data.items ?? []).map((o) => [o.id, `${o.name} (${o.id})`]) : []);
  const list = useLoad(() => {
    // "to" is exclusive: the day after the chosen last day.
    const toIso = to ? new Date(new Date(to + 'T00:00:00').getTime() + 86400000).toISOString() : undefined;
    return call('GET /v1/api/verifications', () =>
      api.GET('/v1/api/verifications', {
        params: {
          query: {
            page,
            size: 25,
            status: status || undefined,
            reason: reason || undefined,
            operatorId: operator || undefined,
            serviceType: method || undefined,
            from: dayStart(from),
            to: toIso,
          },
        },
      }),
    );
  }, [page, status, reason, operator, method, from, to]);
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
        <Choice
          label="Reason"
          value={reason}
          values={reasons}
          onChange={(v) => {
            setReason(v);
            setPage(0);
          }}
        />
        <Choice
          label="Operator"
          value={operator}
          values={operator && !operatorIds.includes(operator) ? [...operatorIds, operator] : operatorIds}
          names={operatorNames}
          onChange={(v) => {
            setOperator(v);
            setPage(0);
          }}
        />
        <Choice
          label="Method"
          value={method}
          values={methods}
          onChange={(v) => {
            setMethod(v);
            setPage(0);
          }}
        />
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
              <TableHead columns={['When', 'Number', 'Outcome', 'Reason', 'Operator', { label: 'Charged', num: true }]} />
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
