// Usage analytics: requests, tokens and cost over a date range (at most 31 days; the last
// 30 by default), grouped by day, person, group, model, upstream or session, with totals,
// a chart per day and the same report as CSV.

import { useState } from 'preact/hooks';

import { ORG, type UsageReport, type UsageRow, query } from '../api';
import { DailyChart } from '../chart';
import { useGet } from '../hooks';
import { Empty, ErrorLine, Loading } from '../ui';
import { SortHeader, sortRows, useSort } from '../../views/table';
import { compact, count, dayLabel, localTime, modelLabel, money } from '../../format';

const GROUPS = [
  { id: 'day', label: 'Day' },
  { id: 'user', label: 'Person' },
  { id: 'group', label: 'Group' },
  { id: 'model', label: 'Model' },
  { id: 'upstream', label: 'Upstream' },
  { id: 'session', label: 'Session' },
] as const;
type GroupBy = (typeof GROUPS)[number]['id'];

const DAY_MS = 86_400_000;
const utcDay = (t: number) => new Date(t).toISOString().slice(0, 10);

type Key = 'key' | 'requests' | 'errors' | 'input_tokens' | 'output_tokens' | 'cache_read_tokens' | 'cache_creation_tokens' | 'cost_micro_usd';

function KeyCell({ groupBy, k }: { groupBy: string; k: string }) {
  if (groupBy === 'day') return <span>{dayLabel(k)}</span>;
  if (groupBy === 'user')
    return k === '' ? (
      <span class="muted">(not a person)</span>
    ) : (
      <a class="clip" href={`#people/${encodeURIComponent(k)}`} title={k}>
        {k}
      </a>
    );
  if (groupBy === 'group')
    return k === '' ? (
      <span class="muted">(in no group)</span>
    ) : (
      <span class="clip" title={k}>
        {k}
      </span>
    );
  if (groupBy === 'model')
    return (
      <span class="clip" title={k}>
        {modelLabel(k)}
      </span>
    );
  return (
    <span class={groupBy === 'session' ? 'clip mono' : 'clip'} title={k}>
      {k === '' ? '—' : k}
    </span>
  );
}

export function AnalyticsPage() {
  const [now] = useState(() => Date.now());
  const today = utcDay(now);
  const [groupBy, setGroupBy] = useState<GroupBy>('day');
  const [from, setFrom] = useState(utcDay(now - 29 * DAY_MS));
  const [to, setTo] = useState(today);
  const { sort, toggle } = useSort<Key>({ key: 'key', dir: 'ascending' }, ['key']);

  const start = Date.parse(`${from}T00:00:00Z`);
  const endDay = Date.parse(`${to}T00:00:00Z`);
  let rangeError: string | null = null;
  if (Number.isNaN(start) || Number.isNaN(endDay)) rangeError = 'Choose both dates.';
  else if (endDay < start) rangeError = 'The end comes before the start.';
  else if (endDay - start > 30 * DAY_MS) rangeError = 'At most 31 days at a time.';
  // Up to the end of the last day, or now when that is today.
  const ending = to >= today ? new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z') : `${utcDay(endDay + DAY_MS)}T00:00:00Z`;
  const params = { starting_at: `${from}T00:00:00Z`, ending_at: ending, group_by: groupBy };
  const read = useGet<UsageReport>(rangeError ? null : `${ORG}/analytics/usage${query(params)}`);
  const csv = `${ORG}/analytics/usage${query({ ...params, format: 'csv' })}`;
  const r = read.data;
  const rows = r ? sortRows<UsageRow, Key>(r.data, sort, (x, k) => x[k]) : [];

  return (
    <section class="stack" aria-labelledby="h-analytics" data-page="analytics">
      <div class="view-head">
        <h2 id="h-analytics">Usage analytics</h2>
        <a id="analytics-export" class="button-link secondary" href={csv} download={`gatehouse-usage-${groupBy}-${from}-${to}.csv`}>
          Export CSV
        </a>
      </div>
      <form class="row" onSubmit={(e) => e.preventDefault()}>
        <label>
          Group by
          <select id="analytics-group-by" value={groupBy} onChange={(e) => setGroupBy(e.currentTarget.value as GroupBy)}>
            {GROUPS.map((g) => (
              <option value={g.id} key={g.id}>
                {g.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          From (UTC)
          <input id="analytics-from" type="date" value={from} max={today} onInput={(e) => setFrom(e.currentTarget.value)} />
        </label>
        <label>
          To (UTC)
          <input id="analytics-to" type="date" value={to} max={today} onInput={(e) => setTo(e.currentTarget.value)} />
        </label>
      </form>
      {rangeError && (
        <p class="banner warn" role="alert">
          {rangeError}
        </p>
      )}
      {read.error && <ErrorLine error={read.error} retry={read.reload} />}
      {read.loading && <Loading what="usage" />}
      {r && !read.loading && (
        <>
          <p class="muted small">
            {localTime(r.starting_at)} – {localTime(r.ending_at)}
            {groupBy === 'group' ? ' · a person counts in each of their groups, so the groups add up to more than the total.' : ''}
          </p>
          {r.data.length === 0 ? (
            <Empty testid="no-usage">
              <p>
                No requests in this range. Usage appears once people send requests through the gateway (Claude Code after{' '}
                <code>/login</code>, or any client with a Gatehouse key).
              </p>
            </Empty>
          ) : (
            <>
              {r.group_by === 'day' && (
                <DailyChart
                  testid="chart-usage"
                  title="Cost and requests per day"
                  days={r.data.map((d) => ({ date: d.key, cost_micro_usd: d.cost_micro_usd, requests: d.requests }))}
                />
              )}
              <div class="scroll">
                <table class="dense" data-testid="usage">
                  <thead>
                    <tr>
                      <SortHeader id="key" sort={sort} toggle={toggle}>
                        {GROUPS.find((g) => g.id === r.group_by)?.label ?? r.group_by}
                      </SortHeader>
                      <SortHeader id="requests" sort={sort} toggle={toggle} num>
                        Requests
                      </SortHeader>
                      <SortHeader id="errors" sort={sort} toggle={toggle} num>
                        Errors
                      </SortHeader>
                      <SortHeader id="input_tokens" sort={sort} toggle={toggle} num>
                        Input
                      </SortHeader>
                      <SortHeader id="output_tokens" sort={sort} toggle={toggle} num>
                        Output
                      </SortHeader>
                      <SortHeader id="cache_read_tokens" sort={sort} toggle={toggle} num>
                        Cache read
                      </SortHeader>
                      <SortHeader id="cache_creation_tokens" sort={sort} toggle={toggle} num>
                        Cache write
                      </SortHeader>
                      <SortHeader id="cost_micro_usd" sort={sort} toggle={toggle} num>
                        Cost
                      </SortHeader>
                    </tr>
                  </thead>
                  <tbody>
                    {rows.map((x) => (
                      <tr key={x.key} data-key={x.key}>
                        <td class="key-cell">
                          <KeyCell groupBy={r.group_by} k={x.key} />
                        </td>
                        <td class="num">{count(x.requests)}</td>
                        <td class="num">{count(x.errors)}</td>
                        <td class="num">{compact(x.input_tokens)}</td>
                        <td class="num">{compact(x.output_tokens)}</td>
                        <td class="num">{compact(x.cache_read_tokens)}</td>
                        <td class="num">{compact(x.cache_creation_tokens)}</td>
                        <td class="num cost">{money(x.cost_micro_usd)}</td>
                      </tr>
                    ))}
                  </tbody>
                  <tfoot>
                    <tr class="total-row" data-testid="usage-total">
                      <th scope="row">Total</th>
                      <td class="num">{count(r.total.requests ?? 0)}</td>
                      <td class="num">{count(r.total.errors ?? 0)}</td>
                      <td class="num">{compact(r.total.input_tokens ?? 0)}</td>
                      <td class="num">{compact(r.total.output_tokens ?? 0)}</td>
                      <td class="num">{compact(r.total.cache_read_tokens ?? 0)}</td>
                      <td class="num">{compact(r.total.cache_creation_tokens ?? 0)}</td>
                      <td class="num cost">{money(r.total.cost_micro_usd ?? 0)}</td>
                    </tr>
                  </tfoot>
                </table>
              </div>
            </>
          )}
        </>
      )}
    </section>
  );
}
