// Routing (read-only): every upstream's health as this replica sees it, each breaker's
// transitions, and "route explain": where a Messages request would go, without sending it.

import { useState } from 'preact/hooks';

import { ORG, type Upstream, call, errorText } from '../api';
import { useGet } from '../hooks';
import { Empty, ErrorLine, JsonTree, Loading } from '../ui';
import { latency, localTime, percentTenths, relative, shortTime } from '../../format';

const EXAMPLE = JSON.stringify(
  {
    model: 'claude-sonnet-4-5',
    max_tokens: 256,
    messages: [{ role: 'user', content: 'Say hello.' }],
  },
  null,
  2,
);

function stateClass(s: string): string {
  if (s === 'healthy' || s === 'closed') return 'badge ok';
  if (s === 'degraded' || s === 'half_open') return 'badge warn';
  if (s === 'down' || s === 'open') return 'badge bad';
  return 'badge idle';
}

const ms = (v: number | null | undefined) => (v === null || v === undefined ? '—' : latency(v));

export function UpstreamTable({ upstreams, brief }: { upstreams: Upstream[]; brief?: boolean }) {
  if (upstreams.length === 0)
    return (
      <Empty testid="no-upstreams">
        <p>
          No upstream is configured. Upstreams are set in the gateway's configuration file (<code>upstreams:</code>).
        </p>
      </Empty>
    );
  return (
    <div class="scroll">
      <table class="dense" data-testid="upstreams">
        <thead>
          <tr>
            <th scope="col">Upstream</th>
            <th scope="col">State</th>
            <th scope="col">Breaker</th>
            {!brief && (
              <>
                <th scope="col" class="num">TTFB p50</th>
                <th scope="col" class="num">p95</th>
                <th scope="col" class="num">p99</th>
              </>
            )}
            <th scope="col" class="num">Errors</th>
            <th scope="col">Last error</th>
          </tr>
        </thead>
        <tbody>
          {upstreams.map((u) => (
            <tr key={u.name} data-upstream={u.name}>
              <td>
                <span class="clip strong" title={u.name}>
                  {u.name}
                </span>
                <span class="clip muted small">{u.provider}</span>
              </td>
              <td>
                <span class={stateClass(u.state)}>{u.state}</span>
              </td>
              <td>
                <span class={stateClass(u.breaker)}>{u.breaker.replace('_', '-')}</span>
                {u.cooling_until && Date.parse(u.cooling_until) > Date.now() && (
                  <span class="sub muted small" title={localTime(u.cooling_until)}>
                    cooling, until {shortTime(u.cooling_until)}
                  </span>
                )}
              </td>
              {!brief && (
                <>
                  <td class="num">{ms(u.ttfb_p50_ms)}</td>
                  <td class="num">{ms(u.ttfb_p95_ms)}</td>
                  <td class="num">{ms(u.ttfb_p99_ms)}</td>
                </>
              )}
              <td class="num">
                {percentTenths(u.error_rate)}
                <span class="sub muted small">of {u.attempts}</span>
              </td>
              <td class="last-error">
                {u.last_error ? (
                  <>
                    <span class="clamp" title={u.last_error}>
                      {u.last_status ? `${u.last_status} · ` : ''}
                      {u.last_error}
                    </span>
                    <span class="sub muted small" title={localTime(u.last_error_at)}>
                      {relative(u.last_error_at)}
                    </span>
                  </>
                ) : (
                  <span class="muted">none</span>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function RoutingPage() {
  const read = useGet<{ data: Upstream[]; strategy?: string }>(`${ORG}/upstreams`);
  const ups = read.data?.data ?? [];
  return (
    <section class="stack" aria-labelledby="h-routing" data-page="routing">
      <div class="view-head">
        <h2 id="h-routing">Routing</h2>
        {read.data?.strategy && <span class="chip">strategy: {read.data.strategy}</span>}
        <button type="button" class="secondary compact" onClick={read.reload}>
          Refresh
        </button>
      </div>
      <p class="muted">This replica's view of each upstream; breaker state is shared between replicas on PostgreSQL.</p>
      {read.error && <ErrorLine error={read.error} retry={read.reload} />}
      {read.loading && !read.data && <Loading what="upstreams" />}
      {read.data && <UpstreamTable upstreams={ups} />}
      {ups.some((u) => u.transitions.length > 0) && (
        <div class="card stack" data-testid="transitions">
          <h3>Breaker transitions</h3>
          <div class="transitions">
            {ups.map((u) => (
              <div key={u.name}>
                <h4 class="clip" title={u.name}>
                  {u.name}
                </h4>
                {u.transitions.length === 0 ? (
                  <p class="muted small">none</p>
                ) : (
                  <ul class="plain small">
                    {u.transitions.map((t, i) => (
                      <li key={i}>
                        <span class="muted" title={localTime(t.at)}>
                          {shortTime(t.at)}
                        </span>{' '}
                        <span class="wrap-text">{t.change}</span>
                      </li>
                    ))}
                  </ul>
                )}
              </div>
            ))}
          </div>
        </div>
      )}
      <Explain />
    </section>
  );
}

function Explain() {
  const [body, setBody] = useState(EXAMPLE);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ ok: true; value: unknown } | { ok: false; error: string } | null>(null);
  const run = async () => {
    try {
      JSON.parse(body);
    } catch (e) {
      setResult({ ok: false, error: `The body is not JSON: ${errorText(e)}` });
      return;
    }
    setBusy(true);
    try {
      const value = await call<unknown>('POST', '/v1/gatehouse/route/explain', body);
      setResult({ ok: true, value });
    } catch (e) {
      setResult({ ok: false, error: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="card stack" data-testid="explain">
      <h3>Route explain</h3>
      <p class="muted small">
        Paste a Messages request body: the gateway says which upstream would serve it and why, without sending, reserving
        or metering anything.
      </p>
      <label>
        Messages body (JSON)
        <textarea id="explain-body" rows={12} spellcheck={false} value={body} onInput={(e) => setBody(e.currentTarget.value)} />
      </label>
      <div class="row">
        <button type="button" id="explain-run" disabled={busy} onClick={() => void run()}>
          {busy ? 'Explaining…' : 'Explain the route'}
        </button>
        <button type="button" class="secondary" onClick={() => setBody(EXAMPLE)}>
          Reset example
        </button>
      </div>
      <div id="explain-result" aria-live="polite" data-state={result ? (result.ok ? 'ok' : 'error') : 'empty'}>
        {result && !result.ok && (
          <p class="banner error" role="alert">
            {result.error}
          </p>
        )}
        {result && result.ok && (
          <div class="json-box">
            <JsonTree value={result.value} />
          </div>
        )}
      </div>
    </div>
  );
}
