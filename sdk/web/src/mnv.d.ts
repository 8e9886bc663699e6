// Type declarations of the mnv browser SDK (src/mnv.js; dist/mnv.global.js defines the same as
// window.Mnv).

export interface MnvErrorInit {
  code: string;
  httpStatus: number;
  message: string;
  requestId?: string;
  field?: string | null;
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
