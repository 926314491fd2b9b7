// Overview: the organisation's spend against its limits, traffic and errors, the people
// nearest their caps, spend per model and per upstream, upstream health and 30 days of
// cost and requests. One call (`/overview`, a 15-second snapshot), re-read every 30 s.

import { useEffect } from 'preact/hooks';

import { ORG, type Overview } from '../api';
import { DailyChart } from '../chart';
import { useConsole, useGet } from '../hooks';
import { ErrorLine, Loading, PersonName, UsageBar, centsToMicro, modelName, periodLabel, sourceLabel } from '../ui';
import { count, localTime, modelLabel, money, percentTenths, resetsIn } from '../../format';
import { UpstreamTable } from './routing';

export function OverviewPage() {
  const { canEdit } = useConsole();
  const read = useGet<Overview>(`${ORG}/overview`);
  useEffect(() => {
    const t = window.setInterval(read.reload, 30_000);
    return () => window.clearInterval(t);
  }, [read.reload]);
  const o = read.data;
  return (
    <section class="stack" aria-labelledby="h-overview" data-page="overview">
      <div class="view-head">
        <h2 id="h-overview">Overview</h2>
        {o && (
          <span class="muted small" title={localTime(o.generated_at)}>
            as of {localTime(o.generated_at)}
          </span>
        )}
      </div>
      {read.error && <ErrorLine error={read.error} retry={read.reload} />}
      {read.loading && !o && <Loading what="the overview" />}
      {o && (
        <>
          <div class="cards">
            <div class="card" data-testid="spend-today">
              <div class="muted small">Spend today (UTC)</div>
              <div class="big">{money(o.spend.today_micro_usd)}</div>
            </div>
            <div class="card" data-testid="spend-month">
              <div class="muted small">Spend this month</div>
              <div class="big">{money(o.spend.month_micro_usd)}</div>
            </div>
            <div class="card" data-testid="requests-24h">
              <div class="muted small">Requests, last 24 h</div>
              <div class="big">{count(o.requests.last_24h)}</div>
            </div>
            <div class="card" data-testid="errors-24h">
              <div class="muted small">Error rate, last 24 h</div>
              <div class={o.requests.error_rate && o.requests.error_rate > 0.05 ? 'big error-text' : 'big'}>
                {o.requests.last_24h === 0 ? '—' : percentTenths(o.requests.error_rate)}
              </div>
              <div class="muted small">{count(o.requests.errors_24h)} errors</div>
            </div>
          </div>

          <div class="card stack" data-testid="org-limits">
            <h3>Organisation limits</h3>
            {o.spend.organization_limits.length === 0 ? (
              <p class="muted">
                No organisation-wide limit: spend is capped only per person or group, if at all.{' '}
                {canEdit && <a href="#limits">Create a spend limit</a>}
              </p>
            ) : (
              <div class="meters">
                {o.spend.organization_limits.map((l) => (
                  <div class="meter" key={l.spend_limit_id} data-period={l.period}>
                    <div class="meter-head">
                      <span class="meter-name">
                        {periodLabel(l.period)}
                        {l.model ? ` · ${modelName(l.model)}` : ''}
                      </span>
                      <span class="muted small">{l.resets_at ? resetsIn(l.resets_at) : ''}</span>
                    </div>
                    <UsageBar spent={l.spent_micro_usd} cap={centsToMicro(l.amount)} label={`${l.period} organisation limit`} />
                  </div>
                ))}
              </div>
            )}
          </div>

          <div class="card stack" data-testid="nearest">
            <h3>Nearest their caps</h3>
            {o.nearest.length === 0 ? (
              <p class="muted">
                Nobody has a cap yet, or nobody has spent against one.{' '}
                {canEdit && <a href="#limits">Create a spend limit</a>}
              </p>
            ) : (
              <div class="scroll">
                <table class="dense fixed">
                  <thead>
                    <tr>
                      <th scope="col" class="w-person">Person</th>
                      <th scope="col">Period</th>
                      <th scope="col" class="w-bar">Spend against cap</th>
                      <th scope="col">Cap from</th>
                    </tr>
                  </thead>
                  <tbody>
                    {o.nearest.map((n) => (
                      <tr key={`${n.user_id}-${n.period}`} data-user={n.user_id}>
                        <td>
                          <PersonName id={n.user_id} name={n.name} email={n.email} />
                        </td>
                        <td>{periodLabel(n.period)}</td>
                        <td>
                          <UsageBar spent={n.spent_micro_usd} cap={centsToMicro(n.amount)} />
                        </td>
                        <td>{sourceLabel(n.source)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </div>

          <DailyChart
            testid="chart-daily"
            title={`Cost and requests per day, last ${o.daily.length} days`}
            days={o.daily.map((d) => ({ date: d.date, cost_micro_usd: d.cost_micro_usd, requests: d.requests }))}
          />

          <div class="two-col">
            <BreakdownTable
              title="Spend per model (30 days)"
              testid="by-model"
              rows={o.by_model.map((m) => ({ key: m.model, label: modelLabel(m.model), cost: m.cost_micro_usd, requests: m.requests }))}
            />
            <BreakdownTable
              title="Spend per upstream (7 days)"
              testid="by-upstream"
              rows={o.by_upstream.map((m) => ({ key: m.upstream, label: m.upstream, cost: m.cost_micro_usd, requests: m.requests }))}
            />
          </div>

          <div class="stack">
            <h3>Upstream health</h3>
            <UpstreamTable upstreams={o.upstreams} brief />
          </div>
        </>
      )}
    </section>
  );
}

function BreakdownTable({
  title,
  rows,
  testid,
}: {
  title: string;
  testid: string;
  rows: { key: string; label: string; cost: number; requests: number }[];
}) {
  const max = Math.max(1, ...rows.map((r) => r.cost));
  return (
    <div class="card stack" data-testid={testid}>
      <h3>{title}</h3>
      {rows.length === 0 ? (
        <p class="muted">Nothing yet.</p>
      ) : (
        <table class="dense fixed">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col" class="num">Requests</th>
              <th scope="col" class="num w-cost">Cost</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.key}>
                <td>
                  <span class="clip" title={r.key}>
                    {r.label}
                  </span>
                  <span class="ratio-bar wide-bar" aria-hidden="true">
                    <span class="fill" style={{ width: `${Math.round((r.cost / max) * 100)}%` }} />
                  </span>
                </td>
                <td class="num">{count(r.requests)}</td>
                <td class="num">{money(r.cost)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
