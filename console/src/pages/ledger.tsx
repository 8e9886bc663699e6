// The ledger: every balance change, newest first.
import { useState } from 'preact/hooks';
import { api, call } from '../api/client';
import { credits, when, words } from '../format';
import { Loaded, PageHeader, Pager, useLoad } from '../ui';

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
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Reference</th>
                  <th scope="col">Description</th>
                  <th scope="col" class="num">
                    Amount
                  </th>
                  <th scope="col" class="num">
                    Balance after
                  </th>
                </tr>
              </thead>
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
