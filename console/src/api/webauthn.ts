// The passkey ceremonies. The server sends go-webauthn's options as JSON ({"publicKey": {...}},
// protocol.CredentialAssertion / CredentialCreation; a bare options object is read too), the
// browser parses them with PublicKeyCredential.parse*OptionsFromJSON (with a fallback that
// decodes the base64url fields where a browser lacks it), and the credential goes back as
// JSON.stringify(credential.toJSON()).

type Json = Record<string, unknown>;

function unwrapOptions(optionsJson: string): Json {
  const o = JSON.parse(optionsJson) as Json;
  return (o.publicKey && typeof o.publicKey === 'object' ? o.publicKey : o) as Json;
}

function b64url(s: string): ArrayBuffer {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4));
  const a = new Uint8Array(b.length);
  for (let i = 0; i < b.length; i++) a[i] = b.charCodeAt(i);
  return a.buffer;
}

function toB64url(buf: ArrayBuffer): string {
  let s = '';
  for (const c of new Uint8Array(buf)) s += String.fromCharCode(c);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function withIds(list: unknown): unknown {
  return Array.isArray(list) ? list.map((c: Json) => ({ ...c, id: b64url(c.id as string) })) : list;
}

function credentialJson(cred: Credential | null): string {
  if (!(cred instanceof PublicKeyCredential)) throw new PasskeyError('none');
  if (typeof cred.toJSON === 'function') return JSON.stringify(cred.toJSON());
  // Older browsers: the same shape as toJSON by hand.
  const r = cred.response as AuthenticatorAttestationResponse & AuthenticatorAssertionResponse;
  const response: Json = { clientDataJSON: toB64url(r.clientDataJSON) };
  if ('attestationObject' in r && r.attestationObject) {
    response.attestationObject = toB64url(r.attestationObject);
    response.transports = r.getTransports?.() ?? [];
  } else {
    response.authenticatorData = toB64url(r.authenticatorData);
    response.signature = toB64url(r.signature);
    if (r.userHandle) response.userHandle = toB64url(r.userHandle);
  }
  return JSON.stringify({
    id: cred.id,
    rawId: toB64url(cred.rawId),
    type: cred.type,
    response,
    authenticatorAttachment: cred.authenticatorAttachment,
    clientExtensionResults: cred.getClientExtensionResults(),
  });
}

/** A passkey ceremony that did not complete, with the reason in words. */
export class PasskeyError extends Error {
  constructor(readonly kind: 'cancelled' | 'none' | 'unsupported' | 'other', detail = '') {
    super(
      {
        cancelled: 'The passkey prompt was cancelled or timed out.',
        none: 'No passkey was given. Use a passkey registered for this console on this device, a phone or a security key.',
        unsupported: 'This browser does not support passkeys. Use a recent Chrome, Edge, Firefox or Safari.',
        other: 'The passkey could not be used' + (detail ? ': ' + detail : '.'),
      }[kind],
    );
    this.name = 'PasskeyError';
  }
}

function mapError(e: unknown): PasskeyError {
  if (e instanceof PasskeyError) return e;
  if (e instanceof DOMException) {
    if (e.name === 'NotAllowedError' || e.name === 'AbortError') return new PasskeyError('cancelled');
    if (e.name === 'InvalidStateError') return new PasskeyError('other', 'this passkey is already registered');
    if (e.name === 'NotSupportedError') return new PasskeyError('unsupported');
    return new PasskeyError('other', e.message);
  }
  return new PasskeyError('other', e instanceof Error ? e.message : String(e));
}

function supported(): boolean {
  return typeof PublicKeyCredential !== 'undefined' && !!navigator.credentials;
}

/** Asks for an assertion (sign-in, step-up) and returns the credential as JSON. */
export async function getPasskey(optionsJson: string): Promise<string> {
  if (!supported()) throw new PasskeyError('unsupported');
  const o = unwrapOptions(optionsJson);
  try {
    const publicKey =
      typeof PublicKeyCredential.parseRequestOptionsFromJSON === 'function'
        ? PublicKeyCredential.parseRequestOptionsFromJSON(o as unknown as PublicKeyCredentialRequestOptionsJSON)
        : ({ ...o, challenge: b64url(o.challenge as string), allowCredentials: withIds(o.allowCredentials) } as PublicKeyCredentialRequestOptions);
    return credentialJson(await navigator.credentials.get({ publicKey }));
  } catch (e) {
    throw mapError(e);
  }
}

/** Creates a passkey (an invitation's acceptance, another of one's passkeys) and returns the credential as JSON. */
export async function createPasskey(optionsJson: string): Promise<string> {
  if (!supported()) throw new PasskeyError('unsupported');
  const o = unwrapOptions(optionsJson);
  try {
    const publicKey =
      typeof PublicKeyCredential.parseCreationOptionsFromJSON === 'function'
        ? PublicKeyCredential.parseCreationOptionsFromJSON(o as unknown as PublicKeyCredentialCreationOptionsJSON)
        : ({
            ...o,
            challenge: b64url(o.challenge as string),
            user: { ...(o.user as Json), id: b64url((o.user as Json).id as string) },
            excludeCredentials: withIds(o.excludeCredentials),
          } as unknown as PublicKeyCredentialCreationOptions);
    return credentialJson(await navigator.credentials.create({ publicKey }));
  } catch (e) {
    throw mapError(e);
  }
}
