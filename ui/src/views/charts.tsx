// The Dashboard's charts (desktop only), drawn with uPlot on canvas: spend per day over
// 30 days (stacked by model or by project), today by hour, and the cache-read ratio per
// day. Each chart has a legend and its numbers as a table ("Show as table"), which is
// what assistive technology reads: the canvas itself is hidden from it.

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

import type { ComponentChildren } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';

import { type ChartSeries, type InsightCharts, insightChartsPath } from '../api';
import { count, dayLabel, modelLabels, money, ratio } from '../format';
import { useAppGet } from '../hooks';
import { WINDOW_DAYS } from './common';

/** Colours that read on the light and the dark background alike. */
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f'];
const REST_COLOUR = '#8a94a3';
/** At most this many series are drawn; the rest are added up as one. */
const MAX_SERIES = PALETTE.length;

const HEIGHT = 220;

export function cssVar(name: string, fallback: string): string {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v === '' ? fallback : v;
}

/** Follows the OS's light or dark mode, so charts are redrawn in its colours. */
function useDark(): boolean {
  const query = useMemo(() => window.matchMedia('(prefers-color-scheme: dark)'), []);
  const [dark, setDark] = useState(query.matches);
  useEffect(() => {
    const on = () => setDark(query.matches);
    query.addEventListener('change', on);
    return () => query.removeEventListener('change', on);
  }, [query]);
  return dark;
}

/** Axis and grid colours from the page's palette. */
export function axis(extra: uPlot.Axis = {}): uPlot.Axis {
  const fg = cssVar('--muted', '#5d6876');
  const line = cssVar('--line', '#e1e5ea');
  return {
    stroke: fg,
    grid: { stroke: line, width: 1 },
    ticks: { stroke: line, width: 1 },
    font: '12px system-ui, sans-serif',
    ...extra,
  };
}

/** The room one date label takes under the axis, in CSS pixels. */
const LABEL_PX = 52;

/**
 * The bottom axis of a chart with one bar per index: a label under every bar that leaves
 * room for one, counted from the last bar (today, on a chart of days) or, with `steps`,
 * from the first in one of those steps (hours: every 1, 2, 3, 6 or 12). No vertical grid
 * lines: the bars are the grid.
 */
export function indexAxis(label: (i: number) => string, count: number, minPx = LABEL_PX, steps?: number[]): uPlot.Axis {
  return axis({
    grid: { show: false },
    splits: (u) => {
      if (count === 0) return [];
      const width = u.bbox.width / uPlot.pxRatio;
      const need = Math.max(1, Math.ceil(minPx / (width / count)));
      const out: number[] = [];
      if (steps) {
        const step = steps.find((x) => x >= need) ?? steps[steps.length - 1];
        for (let i = 0; i < count; i += step) out.push(i);
      } else {
        for (let i = count - 1; i >= 0; i -= need) out.unshift(i);
      }
      return out;
    },
    values: (_u, splits) => splits.map((i) => (Number.isInteger(i) ? label(i) : '')),
  });
}

export const dollarsAxis = (): uPlot.Axis =>
  axis({
    size: 64,
    values: (_u, splits) => splits.map((v) => money(Math.round(v * 1_000_000))),
  });

/** One bar per index, centred on it. */
export const indexScale = (): uPlot.Scale => ({
  time: false,
  range: (_u, min, max) => [min - 0.5, max + 0.5],
});

export const fromZero = (): uPlot.Scale => ({
  range: (_u, _min, max) => [0, max > 0 ? max * 1.08 : 1],
});

/** A uPlot chart as wide as its container (following it as it resizes). */
export function Plot({ options, data }: { options: Omit<uPlot.Options, 'width' | 'height'>; data: uPlot.AlignedData }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const width = () => Math.max(240, Math.floor(el.clientWidth));
    const chart = new uPlot({ ...options, width: width(), height: HEIGHT }, data, el);
    const observer = new ResizeObserver(() => {
      const w = width();
      if (w !== chart.width) chart.setSize({ width: w, height: HEIGHT });
    });
    observer.observe(el);
    return () => {
      observer.disconnect();
      chart.destroy();
    };
  }, [options, data]);
  return <div class="plot" ref={box} aria-hidden="true" />;
}

function AsTable({ testid, children }: { testid: string; children: ComponentChildren }) {
  return (
    <details class="as-table">
      <summary data-testid={`${testid}-show-table`}>Show as table</summary>
      <div class="scroll">{children}</div>
    </details>
  );
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** The biggest series first; past `MAX_SERIES`, the rest added up as one. */
function topSeries(series: ChartSeries[], days: number): { name: string; values: number[]; colour: string }[] {
  const sorted = [...series].sort((a, b) => sum(b.cost_micro_usd) - sum(a.cost_micro_usd));
  const keep = sorted.length > MAX_SERIES ? sorted.slice(0, MAX_SERIES - 1) : sorted;
  const out = keep.map((s, i) => ({ name: s.name, values: s.cost_micro_usd.slice(0, days), colour: PALETTE[i] }));
  const rest = sorted.slice(keep.length);
  if (rest.length > 0) {
    const values = Array.from({ length: days }, (_, d) => sum(rest.map((s) => s.cost_micro_usd[d] ?? 0)));
    out.push({ name: `${rest.length} others`, values, colour: REST_COLOUR });
  }
  return out;
}

type Split = 'model' | 'project';

function SpendChart({ charts, dark }: { charts: InsightCharts; dark: boolean }) {
  const [split, setSplit] = useState<Split>('model');
  const days = charts.days;
  const series = split === 'model' ? charts.by_model : charts.by_project;
  const totals = days.map((_, d) => sum(series.map((s) => s.cost_micro_usd[d] ?? 0)));
  const total = sum(totals);
  const { options, data } = useMemo(() => {
    const shown = topSeries(series, days.length);
    // Models by their short names in the legend (the table has the full ones).
    if (split === 'model') {
      const labels = modelLabels(shown.map((x) => x.name));
      shown.forEach((x) => {
        x.name = labels.get(x.name) ?? x.name;
      });
    }
    // Stacked bars: each series is drawn up to the running total, the tallest first,
    // so the ones below cover it; the legend shows each one's own amount.
    const stacked: number[][] = [];
    shown.forEach((s, i) => {
      stacked.push(s.values.map((v, d) => (v ?? 0) / 1_000_000 + (i > 0 ? stacked[i - 1][d] : 0)));
    });
    const order = shown.map((_, i) => shown.length - 1 - i);
    const bars = uPlot.paths.bars?.({ size: [0.7, 36], align: 0 });
    const opts: Omit<uPlot.Options, 'width' | 'height'> = {
      scales: { x: indexScale(), y: fromZero() },
      axes: [indexAxis((i) => (days[i] ? dayLabel(days[i]) : ''), days.length), dollarsAxis()],
      cursor: { drag: { x: false, y: false, setScale: false }, points: { show: false } },
      legend: { live: true },
      series: [
        // Not hovering a day: the legend gives each series' total over the whole window.
        {
          label: 'Day',
          value: (_u, v) => (v === null || !days[v] ? `${days.length}-day total` : dayLabel(days[v])),
        },
        ...order.map((i) => ({
          label: shown[i].name,
          stroke: shown[i].colour,
          fill: shown[i].colour,
          width: 0,
          paths: bars,
          points: { show: false },
          value: (_u: uPlot, _v: number, _s: number, idx: number | null) =>
            money(idx === null ? sum(shown[i].values) : (shown[i].values[idx] ?? 0)),
        })),
      ],
    };
    const aligned: uPlot.AlignedData = [days.map((_, i) => i), ...order.map((i) => stacked[i])];
    return { options: opts, data: aligned };
    // Keyed on the numbers, not the objects: a poll with the same numbers redraws nothing.
  }, [split, JSON.stringify(series), JSON.stringify(days), dark]);
  return (
    <figure class="card chart wide" data-testid="chart-spend" data-split={split} aria-labelledby="h-chart-spend">
      <figcaption class="chart-head">
        <h3 id="h-chart-spend">Spend over {days.length} days</h3>
        <div class="toggle" role="group" aria-label="Split the spend">
          {(['model', 'project'] as const).map((s) => (
            <button
              type="button"
              class="secondary compact"
              aria-pressed={split === s}
              data-testid={`chart-spend-by-${s}`}
              onClick={() => setSplit(s)}
              key={s}
            >
              By {s}
            </button>
          ))}
        </div>
      </figcaption>
      <p class="muted small">
        <span data-testid="chart-spend-total">{money(total)}</span> in all, per day.
      </p>
      {total === 0 ? (
        <p class="muted" data-testid="chart-spend-empty">
          No spend in these {days.length} days.
        </p>
      ) : (
        <Plot options={options} data={data} />
      )}
      <AsTable testid="chart-spend">
        <table class="dense">
          <caption>Spend per day by {split} (USD)</caption>
          <thead>
            <tr>
              <th scope="col">Day</th>
              {series.map((s) => (
                <th scope="col" class="num" key={s.name}>
                  {s.name}
                </th>
              ))}
              <th scope="col" class="num">Total</th>
            </tr>
          </thead>
          <tbody>
            {days.map((day, d) => (
              <tr data-testid="chart-spend-row" data-day={day} key={day}>
                <th scope="row">{dayLabel(day)}</th>
                {series.map((s) => (
                  <td class="num" data-series={s.name} key={s.name}>
                    {money(s.cost_micro_usd[d] ?? 0)}
                  </td>
                ))}
                <td class="num" data-testid="chart-spend-day-total">{money(totals[d])}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </AsTable>
    </figure>
  );
}

const hourLabel = (h: number) => `${String(h).padStart(2, '0')}:00`;

function HourlyChart({ charts, dark }: { charts: InsightCharts; dark: boolean }) {
  const hours = charts.today_by_hour;
  const total = sum(hours.map((h) => h.cost_micro_usd));
  const requests = sum(hours.map((h) => h.requests));
  const { options, data } = useMemo(() => {
    const accent = cssVar('--accent', '#2f6f5e');
    const opts: Omit<uPlot.Options, 'width' | 'height'> = {
      scales: { x: indexScale(), y: fromZero() },
      axes: [indexAxis(hourLabel, 24, 44, [1, 2, 3, 4, 6, 12]), dollarsAxis()],
      cursor: { drag: { x: false, y: false, setScale: false }, points: { show: false } },
      series: [
        { label: 'Hour', value: (_u, v) => (v === null ? 'all of today' : hourLabel(v)) },
        {
          label: 'Cost',
          stroke: accent,
          fill: accent,
          width: 0,
          paths: uPlot.paths.bars?.({ size: [0.7, 28], align: 0 }),
          points: { show: false },
          value: (_u, _v, _s, idx) => {
            const cost = idx === null ? total : (hours[idx]?.cost_micro_usd ?? 0);
            const n = idx === null ? requests : (hours[idx]?.requests ?? 0);
            return `${money(cost)} (${count(n)} ${n === 1 ? 'request' : 'requests'})`;
          },
        },
      ],
    };
    const aligned: uPlot.AlignedData = [hours.map((h) => h.hour), hours.map((h) => h.cost_micro_usd / 1_000_000)];
    return { options: opts, data: aligned };
    // Keyed on the numbers, not the objects: a poll with the same numbers redraws nothing.
  }, [JSON.stringify(hours), total, requests, dark]);
  return (
    <figure class="card chart" data-testid="chart-hourly" aria-labelledby="h-chart-hourly">
      <figcaption class="chart-head">
        <h3 id="h-chart-hourly">Today by hour</h3>
      </figcaption>
      <p class="muted small">
        <span data-testid="chart-hourly-total">{money(total)}</span> in {count(requests)} requests today.
      </p>
      {requests === 0 && total === 0 ? (
        <p class="muted" data-testid="chart-hourly-empty">
          No requests today yet.
        </p>
      ) : (
        <Plot options={options} data={data} />
      )}
      <AsTable testid="chart-hourly">
        <table class="dense">
          <caption>Today by hour</caption>
          <thead>
            <tr>
              <th scope="col">Hour</th>
              <th scope="col" class="num">Requests</th>
              <th scope="col" class="num">Cost</th>
            </tr>
          </thead>
          <tbody>
            {hours.map((h) => (
              <tr data-testid="chart-hourly-row" data-hour={h.hour} key={h.hour}>
                <th scope="row">{hourLabel(h.hour)}</th>
                <td class="num" data-testid="chart-hourly-requests">{count(h.requests)}</td>
                <td class="num" data-testid="chart-hourly-cost">{money(h.cost_micro_usd)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </AsTable>
    </figure>
  );
}

function CacheChart({ charts, dark }: { charts: InsightCharts; dark: boolean }) {
  const days = charts.days;
  const ratios = charts.cache_read_ratio;
  const any = ratios.some((r) => r !== null && r !== undefined);
  // The newest day anything was sent: what the summary line and the legend tell.
  let latest = -1;
  ratios.forEach((r, i) => {
    if (r !== null && r !== undefined) latest = i;
  });
  const isToday = latest === days.length - 1;
  const latestLabel = latest < 0 ? '' : isToday ? 'today' : dayLabel(days[latest]);
  const { options, data } = useMemo(() => {
    const colour = PALETTE[2];
    const opts: Omit<uPlot.Options, 'width' | 'height'> = {
      scales: { x: indexScale(), y: { range: [0, 100] } },
      axes: [
        indexAxis((i) => (days[i] ? dayLabel(days[i]) : ''), days.length),
        axis({ size: 48, values: (_u, splits) => splits.map((v) => `${v}%`) }),
      ],
      cursor: { drag: { x: false, y: false, setScale: false }, points: { show: false } },
      series: [
        {
          label: 'Day',
          value: (_u, v) => (v === null || !days[v] ? latestLabel : dayLabel(days[v])),
        },
        {
          label: 'Read from the cache',
          stroke: colour,
          fill: colour,
          width: 0,
          paths: uPlot.paths.bars?.({ size: [0.7, 36], align: 0 }),
          points: { show: false },
          value: (_u, _v, _s, idx) => ratio(ratios[idx === null ? latest : idx]),
        },
      ],
    };
    const aligned: uPlot.AlignedData = [
      days.map((_, i) => i),
      days.map((_, i) => {
        const r = ratios[i];
        return r === null || r === undefined ? null : r * 100;
      }),
    ];
    return { options: opts, data: aligned };
    // Keyed on the numbers, not the objects: a poll with the same numbers redraws nothing.
  }, [JSON.stringify(ratios), JSON.stringify(days), dark]);
  return (
    <figure class="card chart" data-testid="chart-cache" aria-labelledby="h-chart-cache">
      <figcaption class="chart-head">
        <h3 id="h-chart-cache">Cache-read ratio</h3>
      </figcaption>
      <p class="muted small">
        {latest < 0 ? (
          'Share of the prompt read from the cache, per day. Higher is cheaper.'
        ) : (
          <>
            <span data-testid="chart-cache-summary">
              <strong class="fg">{ratio(ratios[latest])}</strong> of {isToday ? "today's" : `${latestLabel}'s`} prompt
              came from the cache
            </span>
            {isToday ? '' : ' (the last day with requests)'}. Higher is cheaper.
          </>
        )}
      </p>
      {any ? (
        <Plot options={options} data={data} />
      ) : (
        <p class="muted" data-testid="chart-cache-empty">
          Nothing sent in these {days.length} days.
        </p>
      )}
      <AsTable testid="chart-cache">
        <table class="dense">
          <caption>Cache-read ratio per day</caption>
          <thead>
            <tr>
              <th scope="col">Day</th>
              <th scope="col" class="num">Cache read</th>
            </tr>
          </thead>
          <tbody>
            {days.map((day, i) => (
              <tr data-testid="chart-cache-row" data-day={day} key={day}>
                <th scope="row">{dayLabel(day)}</th>
                <td class="num" data-testid="chart-cache-ratio">{ratio(ratios[i])}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </AsTable>
    </figure>
  );
}

/** The three charts, read from the app (so the desktop only). */
export function InsightChartsView({ token, tick }: { token: string; tick: unknown }) {
  const read = useAppGet<InsightCharts>(token, insightChartsPath(WINDOW_DAYS), tick);
  const dark = useDark();
  const charts = read.data;
  return (
    <section aria-labelledby="h-charts" data-testid="charts">
      <h2 id="h-charts">Trends</h2>
      {read.error && (
        <p class="banner error" role="alert" data-testid="charts-error">
          Could not read the charts: {read.error.message}
        </p>
      )}
      {read.loading && <p class="muted">Loading…</p>}
      {charts && (
        <div class="charts">
          <SpendChart charts={charts} dark={dark} />
          <HourlyChart charts={charts} dark={dark} />
          <CacheChart charts={charts} dark={dark} />
        </div>
      )}
    </section>
  );
}
