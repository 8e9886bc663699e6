// How values are shown: dates in the person's locale, credits as whole numbers.
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const dateOnly = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
const num = new Intl.NumberFormat();

export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return isNaN(d.getTime()) ? iso : dateTime.format(d);
}

export function day(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return isNaN(d.getTime()) ? iso : dateOnly.format(d);
}

export function credits(n: number | null | undefined): string {
  return n == null ? '—' : num.format(n);
}

export function count(n: number, one: string, many: string): string {
  return `${num.format(n)} ${n === 1 ? one : many}`;
}

/** Enum values as words: "NOT_VERIFIED" → "Not verified", "ROLE_ADMIN" → "Admin". */
export function words(v: string | null | undefined): string {
  if (!v) return '—';
  const s = v.replace(/^(ROLE|STATUS)_/, '').replace(/[_.]/g, ' ').toLowerCase();
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** A role as the API may write it (ADMIN or ROLE_ADMIN) to the plain name. */
export function roleName(r: string | null | undefined): 'ADMIN' | 'MEMBER' | '' {
  const s = (r ?? '').replace(/^ROLE_/, '');
  return s === 'ADMIN' || s === 'MEMBER' ? s : '';
}
