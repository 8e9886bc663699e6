// The demo page's script: what a client's own page does with the browser SDK. The server puts
// the gateway's address into the import below.
import { capture, network, waitForCode, codeEntry, MnvError } from {{.SDK}};

const $ = (id) => document.getElementById(id);

// backend calls this site's own backend (same origin: the session cookie goes along).
async function backend(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const err = new Error(data.error?.message ?? `the demo backend answered ${resp.status}`);
    err.code = data.error?.code ?? 'DEMO_BACKEND';
    err.httpStatus = resp.status;
    throw err;
  }
  return data;
}

function showNetwork() {
  const n = network();
  let text = n.type ?? n.effectiveType ?? 'unknown (this browser does not tell)';
  if (n.wifi) text += ': switch to mobile data, the operator recognises the phone only there';
  $('network').textContent = text;
}

// wifi is the simulated connection: on Wi-Fi the operator's proxy adds no number, so the
// capture goes without the sandbox's number header, as a phone on Wi-Fi would.
const wifi = () => $('connection-wifi').checked;

function showConnection() {
  $('sandbox-number').disabled = wifi();
}

let entry = null;

function reset(state) {
  document.body.dataset.state = state;
  if (entry !== null) entry.destroy();
  entry = null;
  $('code-section').hidden = true;
  for (const id of ['result', 'details', 'error']) $(id).textContent = '';
  delete $('result').dataset.status;
  delete $('error').dataset.code;
  $('error').hidden = true;
}

function showError(e) {
  const where = e instanceof MnvError ? 'mnv' : 'demo backend';
  $('error').dataset.code = e.code ?? 'ERROR';
  $('error').textContent = `${e.code ?? 'ERROR'} (${where}, HTTP ${e.httpStatus ?? '?'}): ${e.message}`;
  $('error').hidden = false;
}

function showResult(v) {
  $('result').textContent = v.status;
  $('result').dataset.status = v.status;
  $('details').textContent = JSON.stringify(v, null, 2);
}

async function run(flow) {
  reset('running');
  for (const b of document.querySelectorAll('.buttons button')) b.disabled = true;
  try {
    const { transactionId } = await backend('POST', '/demo/api/transactions', { flow });
    const sandboxNumber = wifi() ? undefined : $('sandbox-number').value.trim() || undefined;
    const captured = await capture({ transactionId, sandboxNumber });
    if (flow === 'VERIFY') {
      let v = await backend('POST', '/demo/api/verify', { mobileNumber: $('number').value.trim() });
      if (v.status === 'IN_PROGRESS') {
        // The network could not tell: the workflow sent a code, which this page takes on its
        // transaction; then the backend reads the workflow, the proof the page is not.
        document.body.dataset.state = 'code';
        showResult(v);
        const state = await waitForCode({ transactionId });
        if (state.codeExpected) {
          $('code-section').hidden = false;
          entry = codeEntry({ transactionId, container: $('code'), state });
          entry.form.querySelector('input').focus();
          await entry.result;
        }
        v = await backend('GET', '/demo/api/workflow');
      }
      showResult(v);
    } else {
      const s = await backend('GET', '/demo/api/stuck-plus');
      $('result').textContent = `Stuck-plus session ${s.session.mobileNumberMasked}`;
      $('result').dataset.status = captured.status;
      $('details').textContent = JSON.stringify(s.session, null, 2);
    }
  } catch (e) {
    showError(e);
  } finally {
    for (const b of document.querySelectorAll('.buttons button')) b.disabled = false;
    document.body.dataset.state = 'done';
  }
}

$('verify').addEventListener('click', () => run('VERIFY'));
$('stuck-plus').addEventListener('click', () => run('STUCK_PLUS'));
for (const r of document.querySelectorAll('input[name="connection"]')) r.addEventListener('change', showConnection);
showNetwork();
showConnection();
document.body.dataset.state = 'ready';
