// A small client-side router: the console's pages live under /console/, the gateway answers
// index.html for any path without an extension, and links change the history without a load.
import { useEffect, useState } from 'preact/hooks';

export const base = '/console';

const listeners = new Set<() => void>();

export function navigate(to: string, replace = false): void {
  if (to === location.pathname + location.search + location.hash) return;
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  for (const l of listeners) l();
}

addEventListener('popstate', () => {
  for (const l of listeners) l();
});

/** The current path (without the query and fragment); re-renders on every navigation. */
export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const l = () => setPath(location.pathname);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return path;
}

/** Matches a pattern with :params against a path; null when it does not match. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/').filter(Boolean);
  const s = path.split('/').filter(Boolean);
  if (p.length !== s.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    const a = p[i]!;
    const b = s[i]!;
    if (a.startsWith(':')) params[a.slice(1)] = decodeURIComponent(b);
    else if (a !== b) return null;
  }
  return params;
}

/** Follows a same-origin link in the page, unless a modifier asks for a new tab or window. */
export function onLinkClick(e: MouseEvent): void {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.target as Element).closest('a');
  if (!a || a.target || a.origin !== location.origin || !a.pathname.startsWith(base)) return;
  e.preventDefault();
  navigate(a.pathname + a.search + a.hash);
}
