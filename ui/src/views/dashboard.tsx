// Dashboard: spend meters with resets, today/week/month totals, spend per model, prompt
// cache health (`cache.tsx`) and the recent requests (when this caller may see details).
// In the desktop app also a nudge to Get started while nothing is set up, and the charts.

import type { AppState, Dashboard, Meter, Totals } from '../api';
import { count, localTime, money, percent, relative, resetsIn, shortTime } from '../format';
import { PromptCacheSection } from './cache';
import { InsightChartsView } from './charts';
import { type Go, TabLink } from './common';

const PERIOD_LABEL: Record<Meter['period'], string> = {
  daily: 'Daily',
  weekly: 'Weekly',
  monthly: 'Monthly',
};

function MeterBar({ m }: { m: Meter }) {
  const id = `meter-${m.period}`;
  const pct = m.utilization === null ? null : percent(m.utilization);
  const level = pct === null ? '' : pct >= 95 ? 'crit' : pct >= 75 ? 'warn' : '';
  return (
    <div class="meter" data-testid={id}>
      <div class="meter-head">
        <span class="meter-name" id={`${id}-label`}>{PERIOD_LABEL[m.period]}</span>
        <span>
          <strong data-testid={`${id}-spent`}>{money(m.spent_micro_usd)}</strong>
          <span class="muted"> of </span>
          <span data-testid={`${id}-limit`}>
            {m.limit_micro_usd === null ? 'no limit' : money(m.limit_micro_usd)}
          </span>
        </span>
      </div>
      {pct === null ? (
        <div class="bar empty" aria-hidden="true" />
      ) : (
        <div
          class="bar"
          role="progressbar"
          aria-labelledby={`${id}-label`}
          aria-valuemin={0}
          aria-valuemax={100}
          aria-valuenow={pct}
          aria-valuetext={`${pct}% of the ${m.period} limit used`}
          data-testid={`${id}-bar`}
        >
          <div class={`fill ${level}`} style={{ width: `${Math.min(100, pct)}%` }} />
        </div>
      )}
      <div class="meter-foot muted">
        {pct === null ? 'no limit set' : <span data-testid={`${id}-percent`}>{pct}% used</span>}
        {' · '}
        <span title={localTime(m.resets_at)}>{resetsIn(m.resets_at)}</span>
      </div>
    </div>
  );
}

function TotalCard({ label, id, t }: { label: string; id: string; t: Totals }) {
  return (
    <div class="card" data-testid={`total-${id}`}>
      <div class="muted">{label}</div>
      <div class="big" data-testid={`total-${id}-cost`}>{money(t.cost_micro_usd)}</div>
      <div class="muted small">
        <span data-testid={`total-${id}-requests`}>{count(t.requests)}</span> requests ·{' '}
        <span data-testid={`total-${id}-input`}>{count(t.input_tokens)}</span> in /{' '}
        <span data-testid={`total-${id}-output`}>{count(t.output_tokens)}</span> out tokens
      </div>
    </div>
  );
}

/** Where the app's own calls go: its token (the desktop only), a tick to re-read, tabs. */
export type DashboardApp = { token: string; tick: unknown; go: Go };

export function DashboardView({ dash, app, desktop }: { dash: Dashboard; app: AppState | null; desktop?: DashboardApp }) {
  const central = app?.mode === 'connected' ? app.central_spend : null;
  const meters = central ? central.limits : dash.meters;
  const recent = dash.recent ?? [];
  const setupBanner = app?.setup?.needed && desktop && (
    <p class="banner info" data-testid="setup-banner">
      Gatehouse isn't set up yet — no provider.{' '}
      <TabLink to="setup" go={desktop.go} testid="setup-banner-link">
        Get started →
      </TabLink>
    </p>
  );
  if (!dash.server.ready) {
    return (
      <p class="banner error" role="alert" data-testid="store-unavailable">
        The gateway's store did not answer, so usage and spend are not shown. Upstream health
        and blocks still are.
      </p>
    );
  }
  return (
    <div class="stack">
      {setupBanner}
      {meters.length > 0 && (
        <section aria-labelledby="h-meters">
          <h2 id="h-meters">Spend limits</h2>
          {central && (
            <p class="muted small">
              From the central server, fetched {relative(central.fetched_at)}.
            </p>
          )}
          {meters.every((m) => m.limit_micro_usd === null) ? (
            // Three empty bars "of no limit" say nothing: one line says it all.
            <p class="muted no-limits" data-testid="meters-none">
              {central ? (
                'Your organisation sets no spend limits for you.'
              ) : app?.mode === 'standalone' && desktop ? (
                <>
                  No budgets set — add one in{' '}
                  <TabLink to="settings" go={desktop.go} testid="meters-settings-link">
                    Settings
                  </TabLink>
                  .
                </>
              ) : (
                'No spend limits are set.'
              )}
            </p>
          ) : (
            <div class="meters" data-testid="meters">
              {meters.map((m) => (
                <MeterBar m={m} key={m.period} />
              ))}
            </div>
          )}
        </section>
      )}
      <section aria-labelledby="h-usage">
        <h2 id="h-usage">Usage</h2>
        <div class="cards">
          <TotalCard label="Today (UTC)" id="today" t={dash.usage.today} />
          <TotalCard label="This week" id="week" t={dash.usage.week} />
          <TotalCard label="This month" id="month" t={dash.usage.month} />
        </div>
      </section>
      {app && desktop && <InsightChartsView token={desktop.token} tick={desktop.tick} />}
      <section aria-labelledby="h-models">
        <h2 id="h-models">Spend per model this month</h2>
        {dash.by_model.length === 0 ? (
          <p class="muted">No requests this month.</p>
        ) : (
          <table data-testid="by-model">
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col" class="num">Requests</th>
                <th scope="col" class="num">Input tokens</th>
                <th scope="col" class="num">Output tokens</th>
                <th scope="col" class="num">Cost</th>
              </tr>
            </thead>
            <tbody>
              {dash.by_model.map((m) => (
                <tr data-testid="model-row" key={m.model}>
                  <td class="mono">{m.model}</td>
                  <td class="num">{count(m.requests)}</td>
                  <td class="num">{count(m.input_tokens)}</td>
                  <td class="num">{count(m.output_tokens)}</td>
                  <td class="num" data-testid="model-cost">{money(m.cost_micro_usd)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      <PromptCacheSection dash={dash} />
      <section aria-labelledby="h-recent">
        <h2 id="h-recent">Recent requests</h2>
        {!dash.detail ? (
          <p class="muted" data-testid="no-detail">
            Request details are shown on this machine (loopback) or with an admin key.
          </p>
        ) : recent.length === 0 ? (
          <p class="muted">No requests yet.</p>
        ) : (
          <div class="scroll">
            <table data-testid="recent">
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Model</th>
                  <th scope="col">Upstream</th>
                  <th scope="col" class="num">Status</th>
                  <th scope="col" class="num">Tokens in / out</th>
                  <th scope="col" class="num">Cost</th>
                  <th scope="col">Route</th>
                </tr>
              </thead>
              <tbody>
                {recent.map((r) => (
                  <tr data-testid="recent-row" key={r.request_id}>
                    <td class="time" title={`${localTime(r.at)} · ${r.request_id}`}>{shortTime(r.at)}</td>
                    <td class="mono">{r.model}</td>
                    <td class="upstream" title={r.upstream ?? undefined}>{r.upstream ?? '—'}</td>
                    <td class="num">
                      <span class={r.status < 400 ? 'badge ok' : 'badge bad'}>{r.status}</span>
                    </td>
                    <td class="num">
                      {count(r.input_tokens)} / {count(r.output_tokens)}
                    </td>
                    <td class="num" data-testid="recent-cost">{money(r.cost_micro_usd)}</td>
                    <td class="reason">{r.route_reason}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </div>
  );
}
