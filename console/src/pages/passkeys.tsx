// Your passkeys: the signed-in person's own passkeys. Add another (a registration after a
// step-up, which the API wrapper asks for), rename one, remove one (the last is kept: the API
// answers 409 and the dialog shows why).
import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { createPasskey } from '../api/webauthn';
import { when } from '../format';
import { Badge, Confirm, Dialog, DialogActions, Field, FormError, Loaded, PageHeader, TableHead, useAction, useLoad } from '../ui';

type Passkey = Schemas['Passkey'];

const label = (k: Passkey) => k.name || 'Unnamed passkey';

export function Passkeys() {
  const l = useLoad(() => call('GET /v1/api/console/passkeys', () => api.GET('/v1/api/console/passkeys')), []);
  const [adding, setAdding] = useState(false);
  const [renaming, setRenaming] = useState<Passkey | null>(null);
  const [removing, setRemoving] = useState<Passkey | null>(null);
  return (
    <>
      <PageHeader title="Your passkeys">
        <button type="button" class="button button-primary" onClick={() => setAdding(true)}>
          Add a passkey
        </button>
      </PageHeader>
      <p class="muted">
        The passkeys you sign in with. Add one on each device you use, so that losing one does not lock you out; your last passkey cannot be removed.
      </p>
      <Loaded load={l} isEmpty={(d) => !d.items?.length} empty="You have no passkeys.">
        {(d) => (
          <table class="table">
            <TableHead columns={['Name', 'Kind', 'Added', 'Last used']} actions />
            <tbody>
              {d.items!.map((k) => (
                <tr key={k.id} data-passkey={k.id}>
                  <td>{label(k)}</td>
                  <td>{k.backupEligible ? <Badge tone="good">Synced</Badge> : <Badge>This device only</Badge>}</td>
                  <td>{when(k.createdAt)}</td>
                  <td>{k.lastUsedAt ? when(k.lastUsedAt) : 'Never'}</td>
                  <td>
                    <button type="button" class="button button-quiet" aria-label={`Rename ${label(k)}`} onClick={() => setRenaming(k)}>
                      Rename
                    </button>
                    <button type="button" class="button button-quiet" aria-label={`Remove ${label(k)}`} onClick={() => setRemoving(k)}>
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Loaded>
      <AddPasskey open={adding} onClose={() => setAdding(false)} onAdded={l.reload} />
      {renaming && <Rename passkey={renaming} onClose={() => setRenaming(null)} onRenamed={l.reload} />}
      <Confirm
        title="Remove the passkey?"
        open={!!removing}
        confirmLabel="Remove passkey"
        onClose={() => setRemoving(null)}
        onConfirm={async () => {
          await call('DELETE /v1/api/console/passkeys/{passkeyId}', () =>
            api.DELETE('/v1/api/console/passkeys/{passkeyId}', { params: { path: { passkeyId: removing!.id } } }),
          );
          l.reload();
        }}
      >
        <p>
          {removing && label(removing)} will no longer sign you in. Sessions already open stay open: end them on the Sessions page.
        </p>
      </Confirm>
    </>
  );
}

function AddPasskey({ open, onClose, onAdded }: { open: boolean; onClose: () => void; onAdded: () => void }) {
  const [name, setName] = useState('');
  const a = useAction();
  const close = () => {
    setName('');
    a.clear();
    onClose();
  };
  return (
    <Dialog title="Add a passkey" open={open} onClose={close}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void a.run(async () => {
            // Asks for a step-up first when the last one is too old (the wrapper's dialog).
            const o = await call('POST /v1/api/console/passkeys/options', () => api.POST('/v1/api/console/passkeys/options', { body: {} }));
            const credentialJson = await createPasskey(o.optionsJson);
            await call('POST /v1/api/console/passkeys', () =>
              api.POST('/v1/api/console/passkeys', { body: { ceremonyId: o.ceremonyId, credentialJson, name: name.trim() || null } }),
            );
            onAdded();
            close();
          });
        }}
      >
        <Field label="Name" hint="Which device or key it is, e.g. Work laptop. Optional.">
          {(id, d) => <input id={id} aria-describedby={d} value={name} maxLength={100} onInput={(e) => setName((e.target as HTMLInputElement).value)} />}
        </Field>
        <FormError error={a.error} />
        <DialogActions onCancel={close} busy={a.busy} label="Create passkey" busyLabel="Waiting for your passkey…" />
      </form>
    </Dialog>
  );
}

function Rename({ passkey, onClose, onRenamed }: { passkey: Passkey; onClose: () => void; onRenamed: () => void }) {
  const [name, setName] = useState(passkey.name);
  const a = useAction();
  return (
    <Dialog title="Rename the passkey" open onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void a.run(async () => {
            await call('PATCH /v1/api/console/passkeys/{passkeyId}', () =>
              api.PATCH('/v1/api/console/passkeys/{passkeyId}', { params: { path: { passkeyId: passkey.id } }, body: { name: name.trim() } }),
            );
            onRenamed();
            onClose();
          });
        }}
      >
        <Field label="Name">
          {(id, d) => <input id={id} aria-describedby={d} value={name} required maxLength={100} onInput={(e) => setName((e.target as HTMLInputElement).value)} />}
        </Field>
        <FormError error={a.error} />
        <DialogActions onCancel={onClose} busy={a.busy} disabled={!name.trim()} label="Save" busyLabel="Saving…" />
      </form>
    </Dialog>
  );
}
