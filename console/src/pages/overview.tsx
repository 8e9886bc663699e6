// Overview: the balance, its expiry, a low-balance warning, charts of spend and verifications
// per day with the outcomes (the usage routes), the workflows' steps by channel, and the last
// ledger entries.
import { api, call, type Schemas } from '../api/client';
import { type Bar, BarChart } from '../chart';
import { credits, day, when, words } from '../format';
import { Badge, Loaded, PageHeader, TableHead, useLoad } from '../ui';
import { channelNames } from './workflows';

export interface Usage {
  spend: Bar[];
  verifications: Bar[];
  /** The range's verifications by final status, most first. */
  outcomes: { status: string; count: number }[];
}

const DAYS = 14;

/** The usage series the charts read: the usage routes over the last DAYS days (UTC). */
export async function loadUsage(): Promise<Usage> {
  const to = new Date().toISOString().slice(0, 10);
  const from = new Date(Date.now() - (DAYS - 1) * 86400000).toISOString().slice(0, 10);
  const [spend, verifications] = await Promise.all([
    call('GET /v1/api/me/usage/spend', () => api.GET('/v1/api/me/usage/spend', { params: { query: { from, to } } })),
    call('GET /v1/api/me/usage/verifications', () => api.GET('/v1/api/me/usage/verifications', { params: { query: { from, to } } })),
  ]);
  const statuses = (verifications.totals?.breakdowns ?? []).find((b) => b.dimension === 'status')?.buckets ?? [];
  return {
    spend: (spend.days ?? []).map((d) => ({ label: d.day, value: d.charged })),
    verifications: (verifications.days ?? []).map((d) => ({ label: d.day, value: d.count })),
    outcomes: statuses.map((b) => ({ status: b.value, count: b.count })).sort((a, b) => b.count - a.count),
  };
}

/** The workflows' steps over the last DAYS days by channel: how many, and what they cost. */
export interface WorkflowUsage {
  channels: { channel: string; steps: number; charged: number }[];
}

export async function loadWorkflowUsage(): Promise<WorkflowUsage> {
  const to = new Date().toISOString().slice(0, 10);
  const from = new Date(Date.now() - (DAYS - 1) * 86400000).toISOString().slice(0, 10);
  const u = await call('GET /v1/api/me/usage/workflows', () => api.GET('/v1/api/me/usage/workflows', { params: { query: { from, to } } }));
  const buckets = (u.totals?.breakdowns ?? []).find((x) => x.dimension === 'channel')?.buckets ?? [];
  return { channels: buckets.map((b) => ({ channel: b.value, steps: b.count, charged: b.charged })).sort((a, b) => b.steps - a.steps) };
}

export function Overview() {
  const workflows = useLoad(loadWorkflowUsage, []);
  const client = useLoad(() => call('GET /v1/api/clients', () => api.GET('/v1/api/clients')), []);
  const usage = useLoad(loadUsage, []);
  const threshold = useLoad(() => call('GET /v1/api/me/low-balance-threshold', () => api.GET('/v1/api/me/low-balance-threshold')), []);
  const ledger = useLoad(() => call('GET /v1/api/me/ledger', () => api.GET('/v1/api/me/ledger', { params: { query: { page: 0, size: 5 } } })), []);
  return (
    <>
      <PageHeader title="Overview" />
      <section aria-labelledby="balance-title" class="panel">
        <h2 id="balance-title">Balance</h2>
        <Loaded load={client}>{(c) => (
            <Balance
              client={c}
              usage={usage.state === 'ready' ? usage.data : null}
              threshold={threshold.state === 'ready' ? threshold.data.effectiveThreshold : null}
            />
          )}</Loaded>
      </section>
      <section aria-labelledby="usage-title" class="panel">
        <h2 id="usage-title">The last {DAYS} days</h2>
        <Loaded
          load={usage}
          isEmpty={(u) => u.spend.every((b) => b.value === 0) && u.verifications.every((b) => b.value === 0)}
          empty="No spend and no verification in the last two weeks."
        >
          {(u) => (
            <>
              <div class="charts">
                <BarChart title="Spend per day" unit="credits" bars={u.spend} />
                <BarChart title="Verifications per day" unit="verifications" bars={u.verifications} />
              </div>
              {u.outcomes.length > 0 && (
                <dl class="stats">
                  {u.outcomes.map((o) => (
                    <div key={o.status}>
                      <dt>{words(o.status)}</dt>
                      <dd class="stat">{o.count}</dd>
                    </div>
                  ))}
                </dl>
              )}
            </>
          )}
        </Loaded>
      </section>
      <section aria-labelledby="workflows-title" class="panel">
        <h2 id="workflows-title">Workflow steps, the last {DAYS} days</h2>
        <Loaded load={workflows} isEmpty={(w) => w.channels.length === 0} empty="No workflow steps in the last two weeks.">
          {(w) => (
            <dl class="stats">
              {w.channels.map((c) => (
                <div key={c.channel}>
                  <dt>{channelNames[c.channel] ?? words(c.channel)}</dt>
                  <dd class="stat">
                    {c.steps} step{c.steps === 1 ? '' : 's'}
                  </dd>
                  <dd class="muted">{credits(c.charged)} credits</dd>
                </div>
              ))}
            </dl>
          )}
        </Loaded>
        <p>
          <a href="/console/workflows">All workflows</a>
        </p>
      </section>
      <section aria-labelledby="recent-title" class="panel">
        <h2 id="recent-title">Latest ledger entries</h2>
        <Loaded load={ledger} isEmpty={(l) => !l.items?.length} empty="No ledger entries yet.">
          {(l) => (
            <table class="table">
              <TableHead columns={['When', 'Kind', { label: 'Amount', num: true }, { label: 'Balance after', num: true }]} />
              <tbody>
                {l.items!.slice(0, 5).map((e) => (
                  <tr key={e.id}>
                    <td>{when(e.createdAt)}</td>
                    <td>{words(String(e.kind ?? ''))}</td>
                    <td class="num">{credits(e.amount)}</td>
                    <td class="num">{credits(e.balanceAfter)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </Loaded>
        <p>
          <a href="/console/ledger">The whole ledger</a>
        </p>
      </section>
    </>
  );
}

/**
 * The balance, with a warning when it is empty, below the client's low-balance threshold (the
 * one balance.low is sent below; 0 is none), or would last less than a week at the last 7 days'
 * pace.
 */
function Balance({ client, usage, threshold }: { client: Schemas['Client']; usage: Usage | null; threshold: number | null }) {
  const spent = usage ? usage.spend.slice(-7).reduce((s, b) => s + b.value, 0) : 0;
  const perDay = spent / 7;
  const lastsDays = perDay > 0 ? Math.floor(client.balance / perDay) : null;
  const pace = lastsDays === null ? '' : ` At the last 7 days' pace it lasts about ${lastsDays} day${lastsDays === 1 ? '' : 's'}.`;
  const belowThreshold = threshold !== null && threshold > 0 && client.balance < threshold;
  const warning =
    client.balance <= 0
      ? 'The balance is empty: paid calls are refused (402) until it is topped up.'
      : belowThreshold
        ? `The balance is low: below the low-balance threshold of ${credits(threshold)} credits.${pace}`
        : lastsDays !== null && lastsDays < 7
          ? `The balance is low.${pace}`
          : '';
  const days = client.daysUntilBalanceExpiry;
  return (
    <>
      <dl class="stats">
        <div>
          <dt>Balance</dt>
          <dd class="stat">{credits(client.balance)} credits</dd>
        </div>
        <div>
          <dt>Expires</dt>
          <dd class="stat">{day(client.balanceExpiryDate)}</dd>
        </div>
        <div>
          <dt>Days left</dt>
          <dd class="stat">{days ?? '—'}</dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd class="stat">
            <Badge tone={client.balanceValid ? 'good' : 'bad'}>{client.balanceValid ? 'Valid' : 'Not usable'}</Badge>
          </dd>
        </div>
      </dl>
      {warning && (
        <p class="warning" role="alert">
          {warning} <a href="/console/settings">Low-balance threshold</a>
        </p>
      )}
      {days != null && days <= 14 && days >= 0 && (
        <p class="warning" role="alert">
          The balance expires in {days} day{days === 1 ? '' : 's'}.
        </p>
      )}
    </>
  );
}
