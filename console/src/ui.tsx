// The console's building blocks: data loading with its three states, forms' actions, dialogs,
// a secret shown once, a pager. Text from the API is always rendered as text (JSX escapes it).
import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError } from './api/client';

export type Load<T> =
  | { state: 'loading'; data?: undefined; error?: undefined }
  | { state: 'error'; error: Error; data?: undefined }
  | { state: 'ready'; data: T; error?: undefined };

/** Loads data when deps change; reload() loads again (after an action). */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): Load<T> & { reload: () => void } {
  const [load, setLoad] = useState<Load<T>>({ state: 'loading' });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoad((l) => (l.state === 'ready' ? l : { state: 'loading' }));
    fn().then(
      (data) => live && setLoad({ state: 'ready', data }),
      (error: Error) => live && setLoad({ state: 'error', error }),
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...load, reload };
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="state state-loading" role="status">
      <span class="spinner" aria-hidden="true" />
      {what}…
    </p>
  );
}

export function ErrorBox({ error, onRetry }: { error: Error; onRetry?: () => void }) {
  const words = error instanceof ApiError && error.status === 403 ? `${error.message} (this needs the ADMIN role or a step-up)` : error.message;
  return (
    <div class="state state-error" role="alert">
      <p>{words}</p>
      {onRetry && (
        <button type="button" class="button" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="state state-empty">{children}</p>;
}

/** Renders a load's loading and error states, the empty state when isEmpty, else children. */
export function Loaded<T>({
  load,
  isEmpty,
  empty,
  children,
}: {
  load: Load<T> & { reload: () => void };
  isEmpty?: (d: T) => boolean;
  empty?: ComponentChildren;
  children: (d: T) => ComponentChildren;
}) {
  if (load.state === 'loading') return <Loading />;
  if (load.state === 'error') return <ErrorBox error={load.error} onRetry={load.reload} />;
  if (isEmpty && isEmpty(load.data)) return <Empty>{empty ?? 'Nothing here yet.'}</Empty>;
  return <>{children(load.data)}</>;
}

/** An action a person starts (a form, a button): busy while it runs, its error shown. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  const run = useCallback(async (f: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await f();
    } catch (e) {
      setError(e instanceof Error ? e : new Error(String(e)));
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(null) };
}

export function FormError({ error }: { error: Error | null }) {
  if (!error) return null;
  return (
    <p class="form-error" role="alert">
      {error.message}
    </p>
  );
}

// The first page of a load keeps the browser's focus (the first Tab reaches the skip link);
// later pages focus their heading.
let firstPage = true;

/** The page's heading, focused on navigation so a screen reader announces the new page. */
export function PageHeader({ title, children }: { title: string; children?: ComponentChildren }) {
  const h = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · mnv console`;
    if (firstPage) firstPage = false;
    else h.current?.focus({ preventScroll: true });
  }, [title]);
  return (
    <header class="page-header">
      <h1 ref={h} tabIndex={-1}>
        {title}
      </h1>
      {children && <div class="page-actions">{children}</div>}
    </header>
  );
}

// A modal <dialog> makes the page behind it inert, but Tab from its last control leaves the
// document for the browser's own UI (headless: for nothing): keepTabInside cycles it within.
function keepTabInside(e: KeyboardEvent) {
  if (e.key !== 'Tab') return;
  const d = e.currentTarget as HTMLDialogElement;
  const stops = [...d.querySelectorAll<HTMLElement>('a[href], button, input, select, textarea, [tabindex]')].filter(
    (el) => !(el as HTMLButtonElement).disabled && el.tabIndex >= 0 && el.getClientRects().length > 0,
  );
  const first = stops[0];
  const last = stops[stops.length - 1];
  if (!first || !last) {
    e.preventDefault();
    return;
  }
  if (e.shiftKey && (document.activeElement === first || !d.contains(document.activeElement))) {
    e.preventDefault();
    last.focus();
  } else if (!e.shiftKey && (document.activeElement === last || !d.contains(document.activeElement))) {
    e.preventDefault();
    first.focus();
  }
}

/** A modal dialog (the native <dialog>: focus kept inside, Escape closes). */
export function Dialog({ title, open, onClose, children }: { title: string; open: boolean; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  const id = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={ref} class="dialog" aria-labelledby={id} onClose={onClose} onKeyDown={keepTabInside}>
      <h2 id={id}>{title}</h2>
      {open && children}
    </dialog>
  );
}

/** Asks before something that cannot be undone; the action's error stays in the dialog. */
export function Confirm({
  title,
  open,
  confirmLabel,
  danger = true,
  onConfirm,
  onClose,
  children,
}: {
  title: string;
  open: boolean;
  confirmLabel: string;
  danger?: boolean;
  onConfirm: () => Promise<void>;
  onClose: () => void;
  children: ComponentChildren;
}) {
  const a = useAction();
  return (
    <Dialog title={title} open={open} onClose={onClose}>
      <div class="dialog-body">{children}</div>
      <FormError error={a.error} />
      <DialogActions
        onCancel={onClose}
        busy={a.busy}
        danger={danger}
        label={confirmLabel}
        busyLabel="Working…"
        onAction={() =>
          a.run(async () => {
            await onConfirm();
            onClose();
          })
        }
      />
    </Dialog>
  );
}

/**
 * A dialog's Cancel and its one action, both disabled while the action runs (then busyLabel
 * says so). Without onAction the action submits the dialog's form.
 */
export function DialogActions({
  onCancel,
  busy,
  label,
  busyLabel,
  onAction,
  danger = false,
  disabled = false,
}: {
  onCancel: () => void;
  busy: boolean;
  label: string;
  busyLabel: string;
  onAction?: () => void;
  danger?: boolean;
  disabled?: boolean;
}) {
  return (
    <div class="dialog-actions">
      <button type="button" class="button" onClick={onCancel} disabled={busy}>
        Cancel
      </button>
      <button type={onAction ? 'button' : 'submit'} class={danger ? 'button button-danger' : 'button button-primary'} disabled={busy || disabled} onClick={onAction}>
        {busy ? busyLabel : label}
      </button>
    </div>
  );
}

/** A column of TableHead: its heading, right-aligned (`num`) for figures. */
export type Column = string | { label: string; num?: boolean };

/**
 * A table's head: a column header each (scope="col", so a screen reader names each cell's
 * column), and with `actions` a last column for the row's buttons, named for screen readers
 * only.
 */
export function TableHead({ columns, actions = false }: { columns: Column[]; actions?: boolean }) {
  return (
    <thead>
      <tr>
        {columns.map((c) =>
          typeof c === 'string' ? (
            <th scope="col" key={c}>
              {c}
            </th>
          ) : (
            <th scope="col" key={c.label} class={c.num ? 'num' : undefined}>
              {c.label}
            </th>
          ),
        )}
        {actions && (
          <th scope="col">
            <span class="visually-hidden">Actions</span>
          </th>
        )}
      </tr>
    </thead>
  );
}

/** A secret (a key, a token, a link) shown once, with a copy button and the warning. */
export function SecretOnce({ label, value, onDone }: { label: string; value: string; onDone: () => void }) {
  const [copied, setCopied] = useState<'' | 'yes' | 'no'>('');
  const id = useId();
  return (
    <div class="secret" role="region" aria-labelledby={id}>
      <h2 id={id}>{label}</h2>
      <p class="warning">Copy it now: it is shown only this once and cannot be read again.</p>
      <div class="secret-row">
        <code class="secret-value">{value}</code>
        <button
          type="button"
          class="button"
          onClick={() =>
            navigator.clipboard.writeText(value).then(
              () => setCopied('yes'),
              () => setCopied('no'),
            )
          }
        >
          Copy
        </button>
      </div>
      <p class="muted" role="status">
        {copied === 'yes' ? 'Copied to the clipboard.' : copied === 'no' ? 'Copying failed: select the text and copy it.' : ''}
      </p>
      <button type="button" class="button button-primary" onClick={onDone}>
        I have copied it
      </button>
    </div>
  );
}

/** Previous and next over a paged list (the API's pages count from 0). */
export function Pager({ page, totalPages, onPage }: { page: number; totalPages: number; onPage: (p: number) => void }) {
  if (totalPages <= 1) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" class="button" disabled={page <= 0} onClick={() => onPage(page - 1)}>
        Previous
      </button>
      <span>
        Page {page + 1} of {totalPages}
      </span>
      <button type="button" class="button" disabled={page + 1 >= totalPages} onClick={() => onPage(page + 1)}>
        Next
      </button>
    </nav>
  );
}

export function Field({ label, hint, children }: { label: string; hint?: string; children: (id: string, describedBy?: string) => JSX.Element }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {children(id, hint ? id + '-hint' : undefined)}
      {hint && (
        <p class="hint" id={id + '-hint'}>
          {hint}
        </p>
      )}
    </div>
  );
}

export function Badge({ tone = 'neutral', children }: { tone?: 'good' | 'bad' | 'warn' | 'neutral'; children: ComponentChildren }) {
  return <span class={`badge badge-${tone}`}>{children}</span>;
}
