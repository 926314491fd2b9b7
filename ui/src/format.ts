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

/** A share (0..1) as `37%`; `—` when there is none. */
export function ratio(r: number | null | undefined): string {
  return r === null || r === undefined || Number.isNaN(r) ? '—' : `${percent(r)}%`;
}

/** A local date and time without seconds, on a 24-hour clock: `Dec 6, 14:04`. */
export function shortTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
}

/** `2026-12-06` (a UTC day) as `Dec 6`. */
export function dayLabel(day: string): string {
  const d = new Date(`${day}T00:00:00Z`);
  if (Number.isNaN(d.getTime())) return day;
  return d.toLocaleDateString('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });
}

/** The UTC day `offset` days from now, as `YYYY-MM-DD`. */
export function utcDay(offset = 0, now = Date.now()): string {
  return new Date(now + offset * 86_400_000).toISOString().slice(0, 10);
}
