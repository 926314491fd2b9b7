// Upstreams: health as the gateway saw it in real requests, and (connected mode) the
// central server the desktop talks to.

import type { AppState, Dashboard, UpstreamHealth } from '../api';
import { localTime, relative } from '../format';

const STATE_CLASS: Record<UpstreamHealth['state'], string> = {
  healthy: 'ok',
  degraded: 'warn',
  down: 'bad',
  unknown: 'idle',
};

const BREAKER_CLASS: Record<UpstreamHealth['breaker'], string> = {
  closed: 'ok',
  half_open: 'warn',
  open: 'bad',
};

function ms(v: number | null): string {
  return v === null ? '—' : `${v} ms`;
}

export function UpstreamsView({ dash, app }: { dash: Dashboard; app: AppState | null }) {
  return (
    <div class="stack">
      <section aria-labelledby="h-upstreams">
        <h2 id="h-upstreams">Upstreams</h2>
        <p class="muted small">
          Health comes from real requests: unknown until the first one. Routing skips an upstream whose
          breaker is open or that is cooling down after a 429.
        </p>
        <div class="scroll">
          <table data-testid="upstreams">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Provider</th>
                <th scope="col">Host</th>
                <th scope="col">State</th>
                <th scope="col">Breaker</th>
                <th scope="col" class="num">TTFB p50 / p95</th>
                <th scope="col" class="num">Errors</th>
                <th scope="col" class="num">Last status</th>
                <th scope="col">Last success</th>
                <th scope="col">Last error</th>
              </tr>
            </thead>
            <tbody>
              {dash.upstreams.map((u) => (
                <tr data-testid="upstream-row" data-name={u.name} key={u.name}>
                  <td>{u.name}</td>
                  <td>{u.provider}</td>
                  <td class="mono">{u.host}</td>
                  <td>
                    <span class={`badge ${STATE_CLASS[u.state]}`} data-testid="upstream-state">
                      {u.state}
                    </span>
                  </td>
                  <td>
                    <span class={`badge ${BREAKER_CLASS[u.breaker]}`} data-testid="upstream-breaker">
                      {u.breaker.replace('_', '-')}
                    </span>
                    {u.cooling_until && (
                      <span class="muted small" title={localTime(u.cooling_until)}>
                        {' '}cooling until {localTime(u.cooling_until)}
                      </span>
                    )}
                  </td>
                  <td class="num" data-testid="upstream-ttfb">
                    {ms(u.ttfb_p50_ms)} / {ms(u.ttfb_p95_ms)}
                  </td>
                  <td class="num" data-testid="upstream-errors" title={`of the last ${u.attempts} attempts`}>
                    {u.error_rate === null ? '—' : `${Math.round(u.error_rate * 100)} %`}
                  </td>
                  <td class="num">{u.last_status ?? '—'}</td>
                  <td title={localTime(u.last_ok_at)}>{relative(u.last_ok_at)}</td>
                  <td>
                    {u.last_error ? (
                      <span title={localTime(u.last_error_at)}>
                        {u.last_error} ({relative(u.last_error_at)})
                      </span>
                    ) : (
                      '—'
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
      {dash.upstreams.some((u) => u.keys && u.keys.length > 0) && (
        <section aria-labelledby="h-keys">
          <h2 id="h-keys">Key pools</h2>
          <p class="muted small">Keys by id only. A key refused with 401/403 is set aside; one answered 429 cools down.</p>
          <div class="scroll">
            <table data-testid="pool-keys">
              <thead>
                <tr>
                  <th scope="col">Upstream</th>
                  <th scope="col">Key</th>
                  <th scope="col">State</th>
                  <th scope="col">Until</th>
                  <th scope="col" class="num">Uses</th>
                  <th scope="col" class="num">Failures</th>
                </tr>
              </thead>
              <tbody>
                {dash.upstreams.flatMap((u) =>
                  (u.keys ?? []).map((k) => (
                    <tr data-testid="pool-key" key={`${u.name}-${k.id}`}>
                      <td>{u.name}</td>
                      <td class="mono">{k.id}</td>
                      <td>
                        <span class={`badge ${k.state === 'ready' ? 'ok' : k.state === 'cooling' ? 'warn' : 'bad'}`}>
                          {k.state === 'set_aside' ? `set aside${k.status ? ` (${k.status})` : ''}` : k.state}
                        </span>
                      </td>
                      <td title={localTime(k.until)}>{k.until ? relative(k.until) : '—'}</td>
                      <td class="num">{k.uses}</td>
                      <td class="num">{k.failures}</td>
                    </tr>
                  )),
                )}
              </tbody>
            </table>
          </div>
        </section>
      )}
      <section aria-labelledby="h-transitions">
        <h2 id="h-transitions">Last transitions</h2>
        <ul class="plain" data-testid="upstream-transitions">
          {dash.upstreams
            .flatMap((u) => u.transitions.map((t) => ({ ...t, name: u.name })))
            .sort((a, b) => (a.at < b.at ? 1 : -1))
            .slice(0, 20)
            .map((t) => (
              <li key={`${t.name}-${t.at}-${t.change}`}>
                <span title={localTime(t.at)}>{relative(t.at)}</span> · <strong>{t.name}</strong> {t.change}
              </li>
            ))}
        </ul>
        {dash.upstreams.every((u) => u.transitions.length === 0) && <p class="muted small">None yet.</p>}
      </section>
      {app?.mode === 'connected' && (
        <section aria-labelledby="h-central">
          <h2 id="h-central">Central server</h2>
          <dl class="facts">
            <dt>URL</dt>
            <dd class="mono">{app.central.url ?? 'not set'}</dd>
            <dt>Reachable</dt>
            <dd>
              {app.central.reachable === null ? 'not checked yet' : app.central.reachable ? 'yes' : 'no'}
            </dd>
            <dt>Last sync</dt>
            <dd>{relative(app.central.last_sync_at)}</dd>
            {app.central.last_error && (
              <>
                <dt>Last error</dt>
                <dd class="error-text">{app.central.last_error}</dd>
              </>
            )}
          </dl>
        </section>
      )}
    </div>
  );
}
