// Formatting for people: money from integer micro-USD, token counts, local times and
// relative resets. Pure functions, so the browser test can check the same rules.

/** Dollars with cents, from micro-USD; a non-zero amount under a cent is `<$0.01`. */
export function money(micro: number): string {
  if (micro > 0 && micro < 10_000) return '<$0.01';
  const cents = Math.round(micro / 10_000);
  const dollars = Math.floor(cents / 100);
  return `$${dollars.toLocaleString('en-US')}.${String(cents % 100).padStart(2, '0')}`;
}

/** Whole numbers with thousands separators. */
export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** A local date and time, short. */
export function localTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return d.toLocaleString(undefined, {
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
}

/** `5 h`, `12 min`, `3 d` from a number of milliseconds (rounded to the unit shown). */
export function span(ms: number): string {
  const min = Math.max(0, Math.round(ms / 60_000));
  if (min < 1) return 'less than a minute';
  if (min < 60) return `${min} min`;
  const h = Math.round(min / 60);
  if (h < 48) return `${h} h`;
  return `${Math.round(h / 24)} d`;
}

/** `resets in 5 h` from a reset time. */
export function resetsIn(iso: string, now = Date.now()): string {
  return `resets in ${span(new Date(iso).getTime() - now)}`;
}

/** `3 min ago` / `in 4 min`. */
export function relative(iso: string | null, now = Date.now()): string {
  if (!iso) return '—';
  const d = new Date(iso).getTime() - now;
  return d >= 0 ? `in ${span(d)}` : `${span(-d)} ago`;
}

/** Utilisation as a whole percentage, capped for the bar at 100. */
export function percent(utilization: number): number {
  return Math.max(0, Math.round(utilization * 100));
}
