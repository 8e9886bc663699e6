// The audit log: every human action (who, what, when, from where, the outcome).
import { useState } from 'preact/hooks';
import { api, call } from '../api/client';
import { when } from '../format';
import { Badge, Loaded, PageHeader, Pager, TableHead, useLoad } from '../ui';

export function AuditLog() {
  const [page, setPage] = useState(0);
  const l = useLoad(() => call('GET /v1/api/me/audit-log', () => api.GET('/v1/api/me/audit-log', { params: { query: { page, size: 50 } } })), [page]);
  return (
    <>
      <PageHeader title="Audit log" />
      <Loaded load={l} isEmpty={(d) => !d.items?.length} empty="Nothing audited yet.">
        {(d) => (
          <>
            <table class="table">
              <TableHead columns={['When', 'Who', 'What', 'Target', 'Outcome', 'From']} />
              <tbody>
                {d.items!.map((e) => (
                  <tr key={e.id}>
                    <td>{when(e.at)}</td>
                    <td>{e.person ? e.person.name || e.person.email : 'The operator'}</td>
                    <td>{e.action}</td>
                    <td>
                      <code>{e.target}</code>
                    </td>
                    <td>
                      <Badge tone={e.status < 400 ? 'good' : 'bad'}>{e.status}</Badge>
                    </td>
                    <td title={e.userAgent}>{e.clientAddress}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <Pager page={page} totalPages={d.totalPages} onPage={setPage} />
          </>
        )}
      </Loaded>
    </>
  );
}
