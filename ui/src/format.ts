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

/**
 * A local date and time to the second, on the same 24-hour clock as `shortTime`:
 * `Dec 6, 2026, 14:04:36`. For tooltips and places where the seconds matter.
 */
export function localTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return d.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
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
  if (d < 0 && d > -60_000) return 'just now';
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

/**
 * A share (0..1) as a percentage to one decimal place, `87.5%` (halves round up); `—` when
 * there is none.
 */
export function percentTenths(r: number | null | undefined): string {
  return r === null || r === undefined || Number.isNaN(r) ? '—' : `${(Math.round(r * 1000) / 10).toFixed(1)}%`;
}

/** A sentence as the engine words it (`the model changed`) for display: `The model changed.` */
export function sentence(s: string): string {
  const t = s.trim();
  if (t === '') return t;
  const capital = t.charAt(0).toUpperCase() + t.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

/**
 * The one visible time format: a local date and time without seconds, on a 24-hour
 * clock: `Dec 6, 14:04`. (`localTime`, with the seconds, goes in its tooltip.)
 */
export function shortTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
}

/** A local time of day, `14:04`. */
export function clockTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
}

/** `Dec 6, 14:04 – 14:31`, or `Dec 5, 23:50 – Dec 6, 00:10` across days. */
export function timeRange(from: string | null | undefined, to: string | null | undefined): string {
  if (!from || !to) return shortTime(from ?? to);
  const a = new Date(from);
  const b = new Date(to);
  if (Number.isNaN(a.getTime()) || Number.isNaN(b.getTime())) return shortTime(from);
  if (shortTime(from) === shortTime(to)) return shortTime(from);
  return a.toDateString() === b.toDateString()
    ? `${shortTime(from)} – ${clockTime(to)}`
    : `${shortTime(from)} – ${shortTime(to)}`;
}

/** Token counts for a narrow column: `950`, `12.3k`, `480k`, `1.2M`. */
export function compact(n: number): string {
  const abs = Math.abs(n);
  const unit = (v: number, suffix: string) => {
    const digits = v < 100 ? 1 : 0;
    const s = v.toFixed(digits).replace(/\.0$/, '');
    return `${n < 0 ? '-' : ''}${s}${suffix}`;
  };
  if (abs < 1_000) return String(n);
  if (abs < 999_500) return unit(abs / 1_000, 'k');
  if (abs < 999_500_000) return unit(abs / 1_000_000, 'M');
  return unit(abs / 1_000_000_000, 'B');
}

/** `2026-12-06` (a calendar day) as `Dec 6`. */
export function dayLabel(day: string): string {
  const d = new Date(`${day}T00:00:00Z`);
  if (Number.isNaN(d.getTime())) return day;
  return d.toLocaleDateString('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });
}

/** This browser's day `offset` days from today, as `YYYY-MM-DD`. */
export function localDay(offset = 0, now = Date.now()): string {
  const d = new Date(now);
  d.setDate(d.getDate() + offset);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/**
 * A model's name without what only tells versions apart: the date stamp and a cloud's
 * wrapping (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`,
 * `us.anthropic.claude-3-5-haiku-20241022-v1:0` → `claude-3-5-haiku`). Keep the full name
 * in a tooltip.
 */
export function modelLabel(model: string): string {
  const short = model
    .replace(/^(?:[a-z]+\.)?anthropic\./, '')
    .replace(/-v\d+(?::\d+)?$/, '')
    .replace(/[-@]\d{8}$/, '');
  return short === '' ? model : short;
}

/** `modelLabel` for each of `models`, unless two would read the same: then the full names. */
export function modelLabels(models: string[]): Map<string, string> {
  const out = new Map<string, string>();
  const seen = new Map<string, number>();
  for (const m of models) seen.set(modelLabel(m), (seen.get(modelLabel(m)) ?? 0) + 1);
  for (const m of models) out.set(m, (seen.get(modelLabel(m)) ?? 0) > 1 ? m : modelLabel(m));
  return out;
}

/** A latency: `850 ms`, `2.3 s`. */
export function latency(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}
