// Sandbox SMS: the messages `make run`'s sandbox SMS centre took for this client's workflows,
// codes included, so a newcomer reads the code without a phone. A real SMS centre has no such
// page: the route answers 404 and the page says why.
import { api, ApiError, call } from '../api/client';
import { when } from '../format';
import { Empty, Loaded, PageHeader, useLoad } from '../ui';

export function SandboxSms() {
  const l = useLoad(() => call('GET /v1/api/me/sandbox/sms', () => api.GET('/v1/api/me/sandbox/sms')), []);
  if (l.state === 'error' && l.error instanceof ApiError && l.error.status === 404) {
    return (
      <>
        <PageHeader title="Sandbox SMS" />
        <Empty>No sandbox SMS centre here: one-time codes go to real phones. `make run` starts one.</Empty>
      </>
    );
  }
  return (
    <>
      <PageHeader title="Sandbox SMS">
        <button type="button" class="button" onClick={l.reload}>
          Refresh
        </button>
      </PageHeader>
      <Loaded load={l} isEmpty={(d) => !d.items?.length} empty="No SMS yet: start a workflow and its code appears here.">
        {(d) => (
          <table class="table">
            <thead>
              <tr>
                <th scope="col">Received</th>
                <th scope="col">To</th>
                <th scope="col">From</th>
                <th scope="col">Text</th>
                <th scope="col">Workflow</th>
              </tr>
            </thead>
            <tbody>
              {d.items!.map((m) => (
                <tr key={m.stepId}>
                  <td>{when(m.receivedAt)}</td>
                  <td>{m.mobileNumber}</td>
                  <td>{m.from}</td>
                  <td>{m.text}</td>
                  <td>
                    <code>{m.workflowId}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
    </>
  );
}
