// Web origins: the pages allowed to run the browser flow. The API takes the whole list at once.
import { useState } from 'preact/hooks';
import { api, call } from '../api/client';
import { useIsAdmin } from '../session';
import { Field, FormError, Loaded, PageHeader, useAction, useLoad } from '../ui';

const pattern = '(https://[^/?#@\\s*]+|http://(localhost|127\\.0\\.0\\.1|\\[::1\\])(:[0-9]{1,5})?)/?';

export function WebOrigins() {
  const admin = useIsAdmin();
  const l = useLoad(() => call('GET /v1/api/me/web-origins', () => api.GET('/v1/api/me/web-origins')), []);
  // The list as loaded until a save answers with the new one: copied into state by an effect,
  // the first render once loaded would show the empty state for a moment.
  const [savedOrigins, setOrigins] = useState<string[] | null>(null);
  const origins = savedOrigins ?? (l.state === 'ready' ? (l.data.items ?? []).map((o) => o.origin) : []);
  const [added, setAdded] = useState('');
  const [saved, setSaved] = useState('');
  const a = useAction();
  const save = (next: string[]) =>
    a.run(async () => {
      setSaved('');
      const r = await call('PUT /v1/api/me/web-origins', () => api.PUT('/v1/api/me/web-origins', { body: { origins: next } }));
      setOrigins((r.items ?? []).map((o) => o.origin));
      setSaved('Saved.');
    });
  return (
    <>
      <PageHeader title="Web origins" />
      <p class="muted">The pages (https, or http on localhost) that may start the browser flow for this client. At most 20.</p>
      <Loaded load={l}>
        {() => (
          <section class="panel" aria-labelledby="origins-title">
            <h2 id="origins-title">Allowed origins</h2>
            {origins.length === 0 ? (
              <p class="state state-empty">No origin yet: no page may start the browser flow.</p>
            ) : (
              <ul class="plain-list">
                {origins.map((o) => (
                  <li key={o}>
                    <code>{o}</code>
                    <button type="button" class="button button-quiet" disabled={!admin || a.busy} onClick={() => save(origins.filter((x) => x !== o))}>
                      Remove<span class="visually-hidden"> {o}</span>
                    </button>
                  </li>
                ))}
              </ul>
            )}
            <form
              class="inline-form"
              onSubmit={(e) => {
                e.preventDefault();
                const o = added.trim().replace(/\/$/, '');
                void save([...origins.filter((x) => x !== o), o]).then(() => setAdded(''));
              }}
            >
              <Field label="Origin" hint="e.g. https://shop.example">
                {(id, d) => (
                  <input
                    id={id}
                    aria-describedby={d}
                    required
                    pattern={pattern}
                    value={added}
                    disabled={!admin}
                    onInput={(e) => setAdded((e.target as HTMLInputElement).value)}
                  />
                )}
              </Field>
              <button type="submit" class="button button-primary" disabled={!admin || a.busy || origins.length >= 20}>
                Add
              </button>
            </form>
            <FormError error={a.error} />
            <p role="status" class="muted">
              {saved}
            </p>
          </section>
        )}
      </Loaded>
    </>
  );
}
