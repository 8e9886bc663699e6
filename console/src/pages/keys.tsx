// Keys and SDK tokens: the lists, create (the secret shown once), rotate with an overlap (the
// new key shown once), revoke (after a confirmation).
import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { when, words } from '../format';
import { useIsAdmin } from '../session';
import { Confirm, Field, FormError, Loaded, PageHeader, Pager, SecretOnce, TableHead, useAction, useLoad } from '../ui';

export function Keys() {
  return (
    <>
      <PageHeader title="Keys and SDK tokens" />
      <ApiKeys />
      <SdkTokens />
    </>
  );
}

function AdminNote() {
  return <p class="muted">Creating and revoking need the ADMIN role.</p>;
}

function ApiKeys() {
  const admin = useIsAdmin();
  const [page, setPage] = useState(0);
  const keys = useLoad(() => call('GET /v1/api/me/api-keys', () => api.GET('/v1/api/me/api-keys', { params: { query: { page, size: 20 } } })), [page]);
  const [secret, setSecret] = useState<string | null>(null);
  const [revoking, setRevoking] = useState<Schemas['ApiKey'] | null>(null);
  const [rotating, setRotating] = useState<Schemas['ApiKey'] | null>(null);
  const [overlap, setOverlap] = useState('3600');
  const [name, setName] = useState('');
  const [role, setRole] = useState<'ADMIN' | 'MEMBER'>('MEMBER');
  const a = useAction();
  return (
    <section class="panel" aria-labelledby="keys-title">
      <h2 id="keys-title">API keys</h2>
      <p class="muted">Keys are for your servers: never put one in a browser or an app.</p>
      {secret ? (
        <SecretOnce label="The new API key" value={secret} onDone={() => setSecret(null)} />
      ) : (
        <form
          class="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            void a.run(async () => {
              const k = await call('POST /v1/api/me/api-keys', (headers) => api.POST('/v1/api/me/api-keys', { body: { name: name.trim(), role }, headers }));
              setName('');
              setSecret(k.apiKey);
              keys.reload();
            });
          }}
        >
          <Field label="Name">{(id) => <input id={id} required maxLength={100} value={name} disabled={!admin} onInput={(e) => setName((e.target as HTMLInputElement).value)} />}</Field>
          <Field label="Role">
            {(id) => (
              <select id={id} value={role} disabled={!admin} onChange={(e) => setRole((e.target as HTMLSelectElement).value as 'ADMIN' | 'MEMBER')}>
                <option value="MEMBER">Member</option>
                <option value="ADMIN">Admin</option>
              </select>
            )}
          </Field>
          <button type="submit" class="button button-primary" disabled={!admin || a.busy}>
            Create key
          </button>
        </form>
      )}
      {!admin && <AdminNote />}
      <FormError error={a.error} />
      <Loaded load={keys} isEmpty={(k) => !k.items?.length} empty="No API keys yet.">
        {(k) => (
          <>
            <table class="table">
              <TableHead columns={['Name', 'Key', 'Role', 'Created', 'Last used', 'Expires']} actions />
              <tbody>
                {k.items!.map((key) => (
                  <tr key={key.id}>
                    <td>{key.name}</td>
                    <td>
                      <code class="nowrap">…{key.hint}</code>
                    </td>
                    <td>{words(String(key.role ?? ''))}</td>
                    <td>{when(key.createdAt)}</td>
                    <td>{key.lastUsedAt ? when(key.lastUsedAt) : 'Never'}</td>
                    <td>{key.expiresAt ? when(key.expiresAt) : '—'}</td>
                    <td class="nowrap">
                      <button type="button" class="button button-quiet" disabled={!admin} onClick={() => setRotating(key)}>
                        Rotate<span class="visually-hidden"> {key.name}</span>
                      </button>
                      <button type="button" class="button button-quiet" disabled={!admin} onClick={() => setRevoking(key)}>
                        Revoke<span class="visually-hidden"> {key.name}</span>
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            <Pager page={page} totalPages={k.totalPages} onPage={setPage} />
          </>
        )}
      </Loaded>
      <Confirm
        title="Rotate the API key?"
        open={!!rotating}
        confirmLabel="Rotate"
        danger={false}
        onClose={() => setRotating(null)}
        onConfirm={async () => {
          const r = await call('POST /v1/api/me/api-keys/{keyId}/rotate', (headers) =>
            api.POST('/v1/api/me/api-keys/{keyId}/rotate', {
              params: { path: { keyId: rotating!.id } },
              body: { oldKeyGraceSeconds: Number(overlap) },
              headers,
            }),
          );
          setSecret(r.apiKey?.apiKey ?? null);
          keys.reload();
        }}
      >
        <p>
          A new key replaces <strong>{rotating?.name}</strong> (…{rotating?.hint}), with its name and role. It is shown once.
        </p>
        <Field label="The old key keeps working for" hint="So your servers can switch without downtime.">
          {(id, d) => (
            <select id={id} aria-describedby={d} value={overlap} onChange={(e) => setOverlap((e.target as HTMLSelectElement).value)}>
              <option value="0">No time: it stops at once</option>
              <option value="3600">One hour</option>
              <option value="86400">One day</option>
              <option value="604800">Seven days</option>
            </select>
          )}
        </Field>
      </Confirm>
      <Confirm
        title="Revoke the API key?"
        open={!!revoking}
        confirmLabel="Revoke"
        onClose={() => setRevoking(null)}
        onConfirm={async () => {
          await call('DELETE /v1/api/me/api-keys/{keyId}', () => api.DELETE('/v1/api/me/api-keys/{keyId}', { params: { path: { keyId: revoking!.id } } }));
          keys.reload();
        }}
      >
        <p>
          Calls with <strong>{revoking?.name}</strong> (…{revoking?.hint}) are refused at once. This cannot be undone.
        </p>
      </Confirm>
    </section>
  );
}

function SdkTokens() {
  const admin = useIsAdmin();
  const [page, setPage] = useState(0);
  const tokens = useLoad(() => call('GET /v1/api/me/sdk-tokens', () => api.GET('/v1/api/me/sdk-tokens', { params: { query: { page, size: 20 } } })), [page]);
  const [secret, setSecret] = useState<string | null>(null);
  const [revoking, setRevoking] = useState<Schemas['SdkToken'] | null>(null);
  const [label, setLabel] = useState('');
  const [ttl, setTtl] = useState('');
  const a = useAction();
  return (
    <section class="panel" aria-labelledby="tokens-title">
      <h2 id="tokens-title">SDK tokens</h2>
      <p class="muted">An SDK token lets your app open an SDK session, and nothing else.</p>
      {secret ? (
        <SecretOnce label="The new SDK token" value={secret} onDone={() => setSecret(null)} />
      ) : (
        <form
          class="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            void a.run(async () => {
              const days = ttl ? Number(ttl) : null;
              const t = await call('POST /v1/api/me/sdk-tokens', (headers) =>
                api.POST('/v1/api/me/sdk-tokens', { body: { label: label.trim(), ttlSeconds: days ? days * 86400 : null }, headers }),
              );
              setLabel('');
              setTtl('');
              setSecret(t.sdkToken);
              tokens.reload();
            });
          }}
        >
          <Field label="Label">{(id) => <input id={id} required maxLength={100} value={label} disabled={!admin} onInput={(e) => setLabel((e.target as HTMLInputElement).value)} />}</Field>
          <Field label="Lifetime in days" hint="Empty: never expires.">
            {(id, d) => (
              <input id={id} aria-describedby={d} type="number" min={1} max={365} value={ttl} disabled={!admin} onInput={(e) => setTtl((e.target as HTMLInputElement).value)} />
            )}
          </Field>
          <button type="submit" class="button button-primary" disabled={!admin || a.busy}>
            Create token
          </button>
        </form>
      )}
      {!admin && <AdminNote />}
      <FormError error={a.error} />
      <Loaded load={tokens} isEmpty={(t) => !t.items?.length} empty="No SDK tokens yet.">
        {(t) => (
          <>
            <table class="table">
              <TableHead columns={['Label', 'Token', 'Created', 'Expires']} actions />
              <tbody>
                {t.items!.map((tok) => (
                  <tr key={tok.id}>
                    <td>{tok.label}</td>
                    <td>
                      <code class="nowrap">…{tok.hint}</code>
                    </td>
                    <td>{when(tok.createdAt)}</td>
                    <td>{tok.expiresAt ? when(tok.expiresAt) : 'Never'}</td>
                    <td>
                      <button type="button" class="button button-quiet" disabled={!admin} onClick={() => setRevoking(tok)}>
                        Revoke<span class="visually-hidden"> {tok.label}</span>
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            <Pager page={page} totalPages={t.totalPages} onPage={setPage} />
          </>
        )}
      </Loaded>
      <Confirm
        title="Revoke the SDK token?"
        open={!!revoking}
        confirmLabel="Revoke"
        onClose={() => setRevoking(null)}
        onConfirm={async () => {
          await call('DELETE /v1/api/me/sdk-tokens/{tokenId}', () => api.DELETE('/v1/api/me/sdk-tokens/{tokenId}', { params: { path: { tokenId: revoking!.id } } }));
          tokens.reload();
        }}
      >
        <p>
          Apps using <strong>{revoking?.label}</strong> can no longer open SDK sessions. This cannot be undone.
        </p>
      </Confirm>
    </section>
  );
}
