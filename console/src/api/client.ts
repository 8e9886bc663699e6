// The console's only way to the server: openapi-fetch over the types generated from the
// committed OpenAPI document, same origin, with the browser's session cookie (fetch's default
// credentials, 'same-origin'); never an API key.
//
// call() unwraps the envelope ({success, messages, data}) into data or an ApiError, sends an
// Idempotency-Key where the document says the operation honours it, runs the step-up ceremony
// when the server answers 403 STEP_UP_REQUIRED and retries once, and reports a 401 (the session
// ended) to whoever registered with onSignedOut.
import createClient from 'openapi-fetch';
import type { components, paths } from './schema';
import { idempotent } from './idempotent';

export type Schemas = components['schemas'];
export type Role = Schemas['Role'];

export const api = createClient<paths>({ baseUrl: '' });

/** An error answer of the API, or a failure to reach it, in words a person can read. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field: string | null = null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

type Answer<T> = { data?: { data?: T } | undefined; error?: unknown; response: Response };
type Headers = Record<string, string>;

export interface CallOptions {
  /** Run the step-up ceremony and retry once on 403 STEP_UP_REQUIRED (default true). */
  stepUp?: boolean;
  /** Report a 401 to onSignedOut (default true; the sign-in pages answer 401 themselves). */
  signedOut?: boolean;
}

let signedOutHandler: () => void = () => {};
/** Registers what happens when the session is gone (a 401): the shell goes to sign-in. */
export function onSignedOut(f: () => void): void {
  signedOutHandler = f;
}

let stepUpHandler: (() => Promise<void>) | null = null;
/** Registers the step-up prompt: it resolves once the person proved their passkey again. */
export function onStepUpRequired(f: () => Promise<void>): void {
  stepUpHandler = f;
}

/**
 * Sends one API operation and returns its data. op is "METHOD path" as in the document, so the
 * Idempotency-Key goes exactly where it is honoured; send gets the headers to pass on.
 */
export async function call<T>(op: string, send: (headers: Headers) => Promise<Answer<T>>, opts: CallOptions = {}): Promise<T> {
  const headers = (): Headers => (idempotent.has(op) ? { 'Idempotency-Key': crypto.randomUUID() } : {});
  let answer = await attempt(send, headers());
  if (answer instanceof ApiError && answer.code === 'STEP_UP_REQUIRED' && opts.stepUp !== false && stepUpHandler) {
    await stepUpHandler();
    // A new key: the refused attempt did nothing, and its answer must not be replayed.
    answer = await attempt(send, headers());
  }
  if (answer instanceof ApiError) {
    if (answer.status === 401 && opts.signedOut !== false) signedOutHandler();
    throw answer;
  }
  return answer;
}

async function attempt<T>(send: (headers: Headers) => Promise<Answer<T>>, headers: Headers): Promise<T | ApiError> {
  let a: Answer<T>;
  try {
    a = await send(headers);
  } catch {
    return new ApiError(0, 'NETWORK', 'The server could not be reached. Check the connection and try again.');
  }
  if (a.response.ok && a.data && a.data.data !== undefined) return a.data.data;
  if (a.response.ok) return {} as T; // an answer with no data (e.g. sign-out)
  return toError(a.response.status, a.error);
}

function toError(status: number, body: unknown): ApiError {
  const m = (body as { messages?: { code?: string; message?: string; field?: string | null }[] } | undefined)?.messages?.[0];
  if (m && typeof m.message === 'string') return new ApiError(status, m.code ?? 'ERROR', m.message, m.field ?? null);
  const words: Record<number, string> = {
    401: 'You are not signed in.',
    403: 'You may not do this.',
    404: 'Not found.',
    429: 'Too many requests: wait a moment and try again.',
    502: 'The server is not answering.',
    503: 'The service is unavailable for now: try again shortly.',
  };
  return new ApiError(status, 'HTTP_' + status, words[status] ?? `The server answered ${status}.`);
}
