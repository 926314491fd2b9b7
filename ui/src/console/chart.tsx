// The console's charts, drawn with the dashboard's uPlot pieces (`views/charts`): cost per day as
// bars, with requests per day as a line on a second axis. The numbers are also in a table
// ("Show as table"), which is what assistive technology reads.

import uPlot from 'uplot';

import { useMemo } from 'preact/hooks';

import { compact, count, dayLabel, money } from '../format';
import { Plot, axis, cssVar, dollarsAxis, fromZero, indexAxis, indexScale } from '../views/charts';

export type DayPoint = { date: string; cost_micro_usd: number; requests?: number };

/** Cost per day (bars) and, when given, requests per day (line, right axis). */
export function DailyChart({ days, testid, title }: { days: DayPoint[]; testid: string; title: string }) {
  const withRequests = days.some((d) => d.requests !== undefined);
  const totalCost = days.reduce((a, d) => a + d.cost_micro_usd, 0);
  const totalRequests = days.reduce((a, d) => a + (d.requests ?? 0), 0);
  const { options, data } = useMemo(() => {
    const accent = cssVar('--accent', '#2f6f5e');
    const second = '#f28e2b';
    const n = days.length;
    const label = (i: number) => (days[i] ? dayLabel(days[i].date) : '');
    const opts: Omit<uPlot.Options, 'width' | 'height'> = {
      scales: { x: indexScale(), y: fromZero(), r: fromZero() },
      axes: [
        indexAxis(label, n),
        dollarsAxis(),
        ...(withRequests
          ? [axis({ scale: 'r', side: 1, size: 52, grid: { show: false }, values: (_u: uPlot, splits: number[]) => splits.map((v) => compact(v)) })]
          : []),
      ],
      cursor: { drag: { x: false, y: false, setScale: false }, points: { show: false } },
      series: [
        { label: 'Day', value: (_u, v) => (v === null || !days[v] ? `${n} days` : dayLabel(days[v].date)) },
        {
          label: 'Cost',
          stroke: accent,
          fill: accent,
          width: 0,
          paths: uPlot.paths.bars?.({ size: [0.7, 36], align: 0 }),
          points: { show: false },
          value: (_u, _v, _s, idx) => money(idx === null ? totalCost : (days[idx]?.cost_micro_usd ?? 0)),
        },
        ...(withRequests
          ? [
              {
                label: 'Requests',
                scale: 'r',
                stroke: second,
                width: 2,
                points: { show: false },
                value: (_u: uPlot, _v: number, _s: number, idx: number | null) =>
                  count(idx === null ? totalRequests : (days[idx]?.requests ?? 0)),
              },
            ]
          : []),
      ],
    };
    const aligned: uPlot.AlignedData = [
      days.map((_, i) => i),
      days.map((d) => d.cost_micro_usd / 1_000_000),
      ...(withRequests ? [days.map((d) => d.requests ?? 0)] : []),
    ];
    return { options: opts, data: aligned };
  }, [JSON.stringify(days)]);
  return (
    <figure class="card chart wide" data-testid={testid}>
      <figcaption class="chart-head">
        <h3>{title}</h3>
      </figcaption>
      <p class="muted small">
        {money(totalCost)} in all{withRequests ? `, ${count(totalRequests)} requests` : ''}.
      </p>
      {totalCost === 0 && totalRequests === 0 ? (
        <p class="muted" data-testid={`${testid}-empty`}>
          Nothing was sent through the gateway in these {days.length} days.
        </p>
      ) : (
        <Plot options={options} data={data} />
      )}
      <details class="as-table">
        <summary>Show as table</summary>
        <div class="scroll">
          <table class="dense">
            <thead>
              <tr>
                <th scope="col">Day</th>
                <th scope="col" class="num">Cost</th>
                {withRequests && (
                  <th scope="col" class="num">
                    Requests
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {days.map((d) => (
                <tr key={d.date}>
                  <th scope="row">{dayLabel(d.date)}</th>
                  <td class="num">{money(d.cost_micro_usd)}</td>
                  {withRequests && <td class="num">{count(d.requests ?? 0)}</td>}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}
