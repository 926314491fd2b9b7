// Prompt cache (a section of the Dashboard): how much of each upstream model's prompts was
// read from the provider's cache since the gateway started, and the conversations that
// lost their cache, each with the likely cause. Renders the snapshot; owns no state.

import type { CacheBreak, Dashboard, PromptCacheTally } from '../api';
import { count, localTime, percentTenths, sentence, shortTime } from '../format';

const CAUSE_LABEL: Record<CacheBreak['cause'], string> = {
  upstream_switch: 'Upstream switch',
  model_switch: 'Model switch',
  system_changed: 'System prompt changed',
  tools_changed: 'Tool list changed',
  expired: 'Cache expired',
  unknown: 'Cause unknown',
};

/** Routing moved the conversation (worth a look); the rest came from the client or time. */
const CAUSE_CLASS: Record<CacheBreak['cause'], string> = {
  upstream_switch: 'warn',
  model_switch: 'warn',
  system_changed: 'idle',
  tools_changed: 'idle',
  expired: 'idle',
  unknown: 'idle',
};

/** Cache reads over every prompt token; `null` before any prompt token. */
export function cacheReadRatio(t: PromptCacheTally): number | null {
  const prompt = t.cache_read_tokens + t.cache_write_tokens + t.uncached_tokens;
  return prompt > 0 ? t.cache_read_tokens / prompt : null;
}

/** Claude Code's session ids are UUIDs: the first group tells them apart on screen. */
const shortSession = (id: string) => id.slice(0, 8);

function TallyRow({ t }: { t: PromptCacheTally }) {
  const r = cacheReadRatio(t);
  return (
    <tr data-testid="prompt-cache-row" data-upstream={t.upstream} data-model={t.model}>
      <td class="upstream" title={t.upstream} data-testid="cache-upstream">{t.upstream}</td>
      <td class="mono" data-testid="cache-model">{t.model}</td>
      <td class="num" data-testid="cache-turns">{count(t.turns)}</td>
      <td class="num" data-testid="cache-read">{count(t.cache_read_tokens)}</td>
      <td class="num" data-testid="cache-write">{count(t.cache_write_tokens)}</td>
      <td class="num" data-testid="cache-uncached">{count(t.uncached_tokens)}</td>
      <td class="num">
        <span class="ratio">
          {r !== null && (
            <span class="ratio-bar" aria-hidden="true">
              <span class="fill" style={{ width: `${Math.min(100, r * 100)}%` }} />
            </span>
          )}
          <strong data-testid="cache-ratio">{percentTenths(r)}</strong>
        </span>
      </td>
      <td class="num" data-testid="cache-breaks">
        {t.breaks > 0 ? <span class="badge warn">{count(t.breaks)}</span> : '0'}
      </td>
    </tr>
  );
}

function BreakRow({ b }: { b: CacheBreak }) {
  return (
    <tr data-testid="cache-break-row" data-cause={b.cause}>
      <td class="time" title={`${localTime(b.at)} · request ${b.request_id}`}>{shortTime(b.at)}</td>
      <td class="mono" data-testid="cache-break-session" title={b.session_id ?? 'no session id'}>
        {b.session_id ? shortSession(b.session_id) : '—'}
      </td>
      <td class="mono" data-testid="cache-break-model">{b.model}</td>
      <td class="upstream" title={b.upstream} data-testid="cache-break-upstream">{b.upstream}</td>
      <td>
        <span class={`badge ${CAUSE_CLASS[b.cause] ?? 'idle'}`} data-testid="cache-break-cause">
          {CAUSE_LABEL[b.cause] ?? b.cause}
        </span>
      </td>
      <td data-testid="cache-break-explanation">{sentence(b.explanation)}</td>
    </tr>
  );
}

export function PromptCacheSection({ dash }: { dash: Dashboard }) {
  // Upstreams in the order they are configured (an unknown one last), then by model.
  const order = (name: string) => {
    const i = dash.upstreams.findIndex((u) => u.name === name);
    return i < 0 ? dash.upstreams.length : i;
  };
  const tallies = [...(dash.prompt_cache ?? [])].sort(
    (a, b) =>
      order(a.upstream) - order(b.upstream) ||
      a.upstream.localeCompare(b.upstream) ||
      a.model.localeCompare(b.model),
  );
  const breaks = dash.cache_breaks ?? [];
  return (
    <section aria-labelledby="h-prompt-cache" data-testid="prompt-cache">
      <h2 id="h-prompt-cache">Prompt cache</h2>
      <p class="muted small">
        Prompt tokens per upstream and model since the gateway started. Tokens read from the
        provider's prompt cache cost a fraction of fresh input, so in long conversations the
        cache-read ratio should stay high; a break is a turn that found its conversation's cache
        gone.
      </p>
      {tallies.length === 0 ? (
        <p class="muted" data-testid="no-prompt-cache">No prompts answered since the gateway started.</p>
      ) : (
        <div class="scroll">
          <table data-testid="prompt-cache-table">
            <thead>
              <tr>
                <th scope="col" rowSpan={2}>Upstream</th>
                <th scope="col" rowSpan={2}>Model</th>
                <th scope="col" rowSpan={2} class="num">Turns</th>
                <th scope="colgroup" colSpan={3} class="group">Prompt tokens</th>
                <th scope="col" rowSpan={2} class="num" title="Cache reads ÷ all prompt tokens">
                  Cache-read ratio
                </th>
                <th scope="col" rowSpan={2} class="num" title="Turns that read nothing from a cache their previous turn had">
                  Breaks
                </th>
              </tr>
              <tr>
                <th scope="col" class="num">Cache reads</th>
                <th scope="col" class="num">Cache writes</th>
                <th scope="col" class="num">Uncached</th>
              </tr>
            </thead>
            <tbody>
              {tallies.map((t) => (
                <TallyRow t={t} key={`${t.upstream}\u001f${t.model}`} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <section aria-labelledby="h-cache-breaks">
        <h3 id="h-cache-breaks">Recent cache breaks</h3>
        {!dash.detail ? (
          <p class="muted" data-testid="cache-breaks-no-detail">
            Cache breaks are shown on this machine (loopback) or with an admin key.
          </p>
        ) : breaks.length === 0 ? (
          <p class="muted" data-testid="no-cache-breaks">
            No conversation lost its prompt cache since the gateway started. A break is listed here when a
            turn reads nothing from a cache its previous turn had, with the likely cause.
          </p>
        ) : (
          <div class="scroll">
            <table data-testid="cache-breaks">
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Session</th>
                  <th scope="col">Model</th>
                  <th scope="col">Upstream</th>
                  <th scope="col">Cause</th>
                  <th scope="col">What happened</th>
                </tr>
              </thead>
              <tbody>
                {breaks.map((b) => (
                  <BreakRow b={b} key={b.request_id} />
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </section>
  );
}
