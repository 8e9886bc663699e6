// Type declarations of the mnv browser SDK (src/mnv.js; dist/mnv.global.js defines the same as
// window.Mnv).

export interface MnvErrorInit {
  code: string;
  httpStatus: number;
  message: string;
  requestId?: string;
  field?: string | null;
  retryAfterMs?: number | null;
}

/**
 * Every failure of a call: `code` is the envelope's code (e.g. `NOT_FOUND`, `ALREADY_USED`,
 * `RATE_LIMITED`) or one of the SDK's own: `NETWORK_ERROR`, `TIMEOUT`, `ABORTED` (httpStatus 0)
 * and `BAD_RESPONSE` (an answer that is not an mnv envelope).
 */
export class MnvError extends Error {
  constructor(init: MnvErrorInit);
  name: 'MnvError';
  code: string;
  /** The HTTP status number; 0 when no answer came. */
  httpStatus: number;
  /** The answer's X-Request-Id, when there was an answer. */
  requestId?: string;
  /** The request field the error names, if any. */
  field?: string | null;
  /** What the answer's Retry-After said (429, 503), in milliseconds; null when nothing. */
  retryAfterMs: number | null;
}

export interface CaptureOptions {
  transactionId: string;
  /** The API's base, e.g. `https://api.example/v1/api`; defaults to the gateway that served this script. */
  baseUrl?: string;
  /** Default 10000. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Sent as X-Mnv-Sandbox-Msisdn: the number the sandbox operator "sees". Only the sandbox believes it. */
  sandboxNumber?: string;
  /** The operator (an id of GET /v1/api/operators); by default the one whose network the browser is on. */
  operatorId?: string;
  /**
   * Where the browser comes back to after an authorization at the operator (NETWORK_API): a URL
   * of this page's origin, without a query. Default: this page (its address without the query
   * and the fragment). It must not be a page that redirects elsewhere.
   */
  returnUrl?: string;
  /**
   * What capture does with an operator's authorization (status AUTHORIZATION_PENDING):
   * `'auto'` (default) sends the browser to `authorizationUrl` and never settles, as the page
   * is leaving; `'manual'` resolves to the answer, and the page goes there itself.
   */
  redirect?: 'auto' | 'manual';
}

export interface CaptureResult {
  transactionId: string;
  /** CAPTURED, NO_NETWORK_IDENTITY, EXPIRED, or AUTHORIZATION_PENDING (redirect `'manual'` only). */
  status: string;
  operatorId: string | null;
  encryptedMobileNumber: string | null;
  expiresAt: string | null;
  /** AUTHORIZATION_PENDING: the operator's authorization, for the browser to open over mobile data. */
  authorizationUrl?: string | null;
  [k: string]: unknown;
}

export function capture(o: CaptureOptions): Promise<CaptureResult>;

export interface ResumeOptions {
  /** The API's base, e.g. `https://api.example/v1/api`; defaults to the gateway that served this script. */
  baseUrl?: string;
  /** Default 10000. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** The page's address; defaults to location.href (and then mnv's fragment is removed from it). */
  url?: string;
}

/**
 * On the page the browser came back to after an operator's authorization, completes the capture
 * this tab started (with the code of the way back and the verifier the tab kept) and resolves
 * to what it gave, as capture resolves; null when this page load is no such return. Rejects
 * with MnvError `STATE_MISMATCH` for a return this tab did not start, or the code of the error
 * that stopped the authorization (e.g. `UNAVAILABLE`: capture again).
 */
export function resumeCapture(o?: ResumeOptions): Promise<CaptureResult | null>;

export interface SessionOptions {
  sdkToken: string;
  clientId: string;
  platform: 'ANDROID' | 'IOS' | 'WEB';
  operatorId?: string;
  deviceId?: string;
  appVersion?: string;
  baseUrl?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
  sandboxNumber?: string;
}

/** Resolves to the envelope's data: sessionId, status, encryptedMobileNumber, operatorId, expiresAt. */
export function createSession(o: SessionOptions): Promise<Record<string, unknown>>;

export interface NetworkInfo {
  type: string | null;
  effectiveType: string | null;
  cellular: boolean | null;
  wifi: boolean | null;
}

/** What navigator.connection tells, where the browser has it; nulls when unknown. */
export function network(): NetworkInfo;

export interface CamaraAuthorizeOptions {
  /** The client's id (the CAMARA client_id). */
  clientId: string;
  /** Where mnv sends the code: one of the redirect URIs the client registered, exactly. */
  redirectUri: string;
  /** The operation the token will be good for, once. */
  scope: 'verify' | 'share';
  /** An unguessable value the page keeps, checked by camaraCode. */
  state: string;
  /** PKCE S256 challenge, when the backend keeps a verifier. */
  codeChallenge?: string;
  /** mnv's public base URL, e.g. `https://api.example`; defaults to the gateway that served this script. */
  issuer?: string;
}

/** The authorization URL the page sends the browser to, over mobile data. */
export function camaraAuthorizeUrl(o: CamaraAuthorizeOptions): string;

export interface CamaraCodeOptions {
  /** The state the page sent. */
  state: string;
  /** The page mnv redirected to; defaults to location.href. */
  url?: string;
}

/** The code for the client's backend; throws MnvError (STATE_MISMATCH, the provider's error). */
export function camaraCode(o: CamaraCodeOptions): string;

export interface WorkflowOptions {
  /** The browser transaction the client's backend started the workflow for. */
  transactionId: string;
  /** The API's base, e.g. `https://api.example/v1/api`; defaults to the gateway that served this script. */
  baseUrl?: string;
  /** Per request; default 10000. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export type WorkflowStatus = 'IN_PROGRESS' | 'VERIFIED' | 'NOT_VERIFIED' | 'FAILED' | 'EXPIRED';

/** A transaction's workflow as its page sees it: never the number. */
export interface WorkflowState {
  status: WorkflowStatus | (string & {});
  /** Why it ended or moved on (CODE_MATCHED, TOO_MANY_ATTEMPTS, CODE_EXPIRED, …; more may come). */
  reason?: string | null;
  /** The channel in progress (SILENT, SMS_OTP); absent once ended. */
  channel?: string | null;
  /** A code was sent and is accepted: show the code field. */
  codeExpected?: boolean;
  attemptsLeft?: number;
  resendsLeft?: number;
  /** When a resend is next allowed (RFC 3339); absent when none is. */
  resendAt?: string | null;
  /** When the code in play stops being accepted (RFC 3339). */
  codeExpiresAt?: string | null;
}

/** Reads where the transaction's workflow stands; NOT_FOUND when it has none. */
export function workflowState(o: WorkflowOptions): Promise<WorkflowState>;

export interface WaitForCodeOptions extends WorkflowOptions {
  /** Between reads; default 2000. */
  intervalMs?: number;
  /** In all; default 120000, then TIMEOUT. */
  waitMs?: number;
}

/** Resolves once the workflow expects a code or has ended (NOT_FOUND is waited out). */
export function waitForCode(o: WaitForCodeOptions): Promise<WorkflowState>;

export interface CheckCodeOptions extends WorkflowOptions {
  /** What the user typed, 1 to 32 characters. */
  code: string;
}

/** Checks the code: IN_PROGRESS with one attempt fewer when wrong, VERIFIED, FAILED or EXPIRED; 409 CONFLICT once ended. */
export function checkCode(o: CheckCodeOptions): Promise<Pick<WorkflowState, 'status' | 'reason' | 'attemptsLeft' | 'codeExpiresAt'>>;

/** Sends a new code; RATE_LIMITED (429, retryAfterMs) within the cooldown, never waited; 409 past the cap. */
export function resendCode(o: WorkflowOptions): Promise<WorkflowState>;

/** The default code field's wording; each may be replaced. */
export interface CodeEntryText {
  label?: string;
  submit?: string;
  resend?: string;
  resendIn?: (seconds: number) => string;
  checking?: string;
  wrong?: (attemptsLeft: number) => string;
  empty?: string;
  sent?: string;
  VERIFIED?: string;
  FAILED?: string;
  EXPIRED?: string;
  NOT_VERIFIED?: string;
  error?: string;
}

export interface CodeEntryOptions extends WorkflowOptions {
  /** Where the form goes. */
  container: Element;
  /** What workflowState or waitForCode gave: the attempts and the resend time shown at first. */
  state?: WorkflowState;
  text?: CodeEntryText;
}

export interface CodeEntry {
  form: HTMLFormElement;
  /** The workflow's end, as the form saw it. */
  result: Promise<{ status: WorkflowStatus | (string & {}); reason: string | null }>;
  destroy(): void;
}

/**
 * The SDK's code field: a labelled input (autocomplete="one-time-code", inputmode="numeric"),
 * Verify, a resend button with its cooldown, and a live region reading out errors and the end.
 */
export function codeEntry(o: CodeEntryOptions): CodeEntry;
