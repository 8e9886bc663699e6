// The ledger: every balance change, newest first.
import { useState } from 'preact/hooks';
import { api, call } from '../api/client';
import { credits, when, words } from '../format';
import { Loaded, PageHeader, Pager, TableHead, useLoad } from '../ui';

export function Ledger() {
  const [page, setPage] = useState(0);
  const l = useLoad(() => call('GET /v1/api/me/ledger', () => api.GET('/v1/api/me/ledger', { params: { query: { page, size: 50 } } })), [page]);
  return (
    <>
      <PageHeader title="Ledger" />
      <Loaded load={l} isEmpty={(d) => !d.items?.length} empty="No ledger entries yet.">
        {(d) => (
          <>
            <table class="table">
              <TableHead columns={['When', 'Kind', 'Reference', 'Description', { label: 'Amount', num: true }, { label: 'Balance after', num: true }]} />
              <tbody>
                {d.items!.map((e) => (
                  <tr key={e.id}>
                    <td>{when(e.createdAt)}</td>
                    <td>{words(String(e.kind ?? ''))}</td>
                    <td>
                      <code>{e.reference}</code>
                    </td>
                    <td>{e.description ?? ''}</td>
                    <td class={e.amount < 0 ? 'num negative' : 'num'}>{credits(e.amount)}</td>
                    <td class="num">{credits(e.balanceAfter)}</td>
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
