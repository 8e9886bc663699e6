// Compiled by `tsc --noEmit` (make sdk-check), never run: the declarations accept what a page
// writes and refuse what it must not.
import { capture, resumeCapture, createSession, network, MnvError, camaraAuthorizeUrl, camaraCode } from '../src/mnv.js';
import type { CaptureOptions, CaptureResult, NetworkInfo, SessionOptions, MnvErrorInit, ResumeOptions } from '../src/mnv.js';

async function page(signal: AbortSignal): Promise<string | null> {
  const n: NetworkInfo = network();
  if (n.wifi === true) return null;
  const o: CaptureOptions = { transactionId: 'tx', baseUrl: 'https://api.example/v1/api', timeoutMs: 5000, signal, sandboxNumber: '+971501234567' };
  try {
    const r: CaptureResult = await capture(o);
    const status: string = r.status;
    const blob: string | null = r.encryptedMobileNumber;
    const extra: unknown = r.stuckPlusSessionId;
    void status, extra;
    return blob;
  } catch (e) {
    if (e instanceof MnvError) {
      const code: string = e.code;
      const http: number = e.httpStatus;
      const id: string | undefined = e.requestId;
      const field: string | null | undefined = e.field;
      const msg: string = e.message;
      void code, http, id, field, msg;
    }
    throw e;
  }
}

async function app(): Promise<unknown> {
  const o: SessionOptions = { sdkToken: 't', clientId: 'c', platform: 'WEB', operatorId: 'sandbox', deviceId: 'd', appVersion: '1' };
  const data: Record<string, unknown> = await createSession(o);
  return data.encryptedMobileNumber;
}

const init: MnvErrorInit = { code: 'TIMEOUT', httpStatus: 0, message: 'late' };
const err: Error = new MnvError(init);

// @ts-expect-error transactionId is required
capture({});
// @ts-expect-error platform is one of ANDROID, IOS, WEB
createSession({ sdkToken: 't', clientId: 'c', platform: 'DESKTOP' });
// @ts-expect-error network() takes nothing and is not async
network().then;

void page, app, err;

function camara(): string {
  const url: string = camaraAuthorizeUrl({ clientId: 'c', redirectUri: 'https://shop.example/cb', scope: 'verify', state: 's' });
  // @ts-expect-error the scope is one of the two operations
  camaraAuthorizeUrl({ clientId: 'c', redirectUri: 'r', scope: 'all', state: 's' });
  const code: string = camaraCode({ state: 's', url });
  return code;
}
void camara;

async function networkAPI(): Promise<string | null> {
  const o: CaptureOptions = { transactionId: 'tx', operatorId: 'op', returnUrl: 'https://shop.example/back', redirect: 'manual' };
  const r: CaptureResult = await capture(o);
  if (r.status === 'AUTHORIZATION_PENDING' && typeof r.authorizationUrl === 'string') location.assign(r.authorizationUrl);
  const ro: ResumeOptions = { baseUrl: 'https://api.example/v1/api', timeoutMs: 5000 };
  const back: CaptureResult | null = await resumeCapture(ro);
  await resumeCapture();
  // @ts-expect-error redirect is 'auto' or 'manual'
  capture({ transactionId: 'tx', redirect: 'popup' });
  return back === null ? null : back.encryptedMobileNumber;
}
void networkAPI;

import { workflowState, waitForCode, checkCode, resendCode, codeEntry } from '../src/mnv.js';
import type { WorkflowState, CodeEntry, CodeEntryOptions } from '../src/mnv.js';

async function codePage(container: HTMLElement): Promise<string> {
  const o = { transactionId: 'tx', baseUrl: 'https://api.example/v1/api' };
  const first: WorkflowState = await workflowState(o);
  const w: WorkflowState = first.codeExpected === true ? first : await waitForCode({ ...o, intervalMs: 1000, waitMs: 60000 });
  const r = await checkCode({ ...o, code: '123456' });
  const left: number | undefined = r.attemptsLeft;
  void left;
  try {
    await resendCode(o);
  } catch (e) {
    if (e instanceof MnvError && e.retryAfterMs !== null) void e.retryAfterMs;
  }
  const opts: CodeEntryOptions = { ...o, container, state: w, text: { label: 'Code', resendIn: (s: number) => `${s}` } };
  const entry: CodeEntry = codeEntry(opts);
  const form: HTMLFormElement = entry.form;
  void form;
  entry.destroy();
  return (await entry.result).status;
}
void codePage;

// @ts-expect-error the code is required
void checkCode({ transactionId: 'tx' });
// @ts-expect-error the container is required
void codeEntry({ transactionId: 'tx' });
