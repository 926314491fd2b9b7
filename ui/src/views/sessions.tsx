// Sessions (desktop only): Claude Code's sessions over the last 30 days, sortable and
// searchable (id, project, model); a row opens the session: its main conversation against
// its subagents, and its requests. The export sits above the list.

import { useEffect, useRef, useState } from 'preact/hooks';

import {
  type AgentUsage,
  type InsightSession,
  type InsightSessions,
  type SessionDetail,
  type SessionRequest,
  insightSessionPath,
  insightSessionsPath,
} from '../api';
import { clockTime, compact, count, latency, localTime, modelLabels, money, ratio, shortTime, span, timeRange } from '../format';
import { useAppGet } from '../hooks';
import { type Go, NoSessions, WINDOW_DAYS, takeSessionSearch, useDebounced } from './common';
import { ExportForm } from './export';
import { SortHeader, type SortValue, sortRows, useSort } from './table';

const SEARCH_DEBOUNCE_MS = 300;

type Col = 'project' | 'models' | 'last' | 'requests' | 'tokens' | 'cache' | 'subagent' | 'cost';

const TEXT_COLS: readonly Col[] = ['project', 'models'];

const time = (iso: string | null) => (iso ? new Date(iso).getTime() : null);

function valueOf(s: InsightSession, col: Col): SortValue {
  switch (col) {
    case 'project':
      // Known projects by name; the unknown ones after them, by session.
      return s.project.known ? s.project.name : `\uffff${s.session_id}`;
    case 'models':
      return s.models.join(', ');
    case 'last':
      return time(s.last_at);
    case 'requests':
      return s.requests;
    case 'tokens':
      return s.input_tokens + s.output_tokens;
    case 'cache':
      return s.cache_read_ratio;
    case 'subagent':
      return s.subagent_cost_micro_usd;
    case 'cost':
      return s.cost_micro_usd;
  }
}

const short = (id: string) => id.slice(0, 8);

/** A project's name; an unknown one (no transcript names its folder) says so, briefly. */
function ProjectName({ p, sessionId }: { p: InsightSession['project']; sessionId: string }) {
  if (!p.known) {
    return (
      <span class="muted unknown" title={`No Claude Code transcript names the folder of session ${sessionId}`}>
        unknown project
      </span>
    );
  }
  return <span title={p.path ?? p.key}>{p.name}</span>;
}

const plural = (n: number, one: string, many: string) => `${count(n)} ${n === 1 ? one : many}`;

/** The models, one a line, by their short names (the first two; the rest as `+N more`);
 *  the full names in the tooltip. */
function Models({ models, labels, testid }: { models: string[]; labels: Map<string, string>; testid?: string }) {
  if (models.length === 0) return <span class="muted" data-testid={testid}>—</span>;
  const shown = models.slice(0, 2);
  return (
    <span class="models" data-testid={testid} title={models.join('\n')}>
      {shown.map((m, i) => (
        <span class="model" key={m}>
          {labels.get(m) ?? m}
          {i < models.length - 1 && <span class="visually-hidden">, </span>}
        </span>
      ))}
      {models.length > shown.length && <span class="model more">+{models.length - shown.length} more</span>}
    </span>
  );
}

function SessionList({
  token,
  tick,
  go,
  q,
  setQ,
  open,
  focusId,
}: {
  token: string;
  tick: unknown;
  go: Go;
  q: string;
  setQ: (q: string) => void;
  open: (id: string) => void;
  focusId: string | null;
}) {
  const settled = useDebounced(q.trim(), SEARCH_DEBOUNCE_MS);
  const read = useAppGet<InsightSessions>(token, insightSessionsPath(WINDOW_DAYS, settled), tick);
  const { sort, toggle } = useSort<Col>({ key: 'last', dir: 'descending' }, TEXT_COLS);
  const table = useRef<HTMLDivElement>(null);
  const data = read.data;
  const rows = data ? sortRows(data.sessions, sort, valueOf) : [];
  const labels = modelLabels([...new Set(rows.flatMap((r) => r.models))]);
  const searching = settled !== '' || q.trim() !== '';
  const focused = useRef(false);
  // Back from a session: put the focus on the row it was opened from.
  useEffect(() => {
    if (!focusId || focused.current || !table.current) return;
    const row = table.current.querySelector<HTMLElement>(`tr[data-session-id="${CSS.escape(focusId)}"] button`);
    if (row) {
      row.focus();
      focused.current = true;
    }
  });
  const head = { sort, toggle };
  return (
    <>
      {read.error && (
        <p class="banner error" role="alert" data-testid="sessions-error">
          Could not read the sessions: {read.error.message}
        </p>
      )}
      {read.loading && !data && <p class="muted">Loading…</p>}
      {data && data.total === 0 && !searching ? (
        <NoSessions go={go} testid="sessions-empty" />
      ) : (
        data && (
          <>
            <div class="toolbar">
              <input
                type="search"
                value={q}
                aria-label="Search sessions"
                placeholder="Search by session id, project or model"
                data-testid="session-search"
                onInput={(e) => setQ(e.currentTarget.value)}
              />
              <span class="muted small" role="status" data-testid="sessions-count">
                {data.sessions.length < data.total
                  ? `The newest ${count(data.sessions.length)} of ${count(data.total)} sessions`
                  : plural(data.total, 'session', 'sessions')}
                {read.dataPath !== insightSessionsPath(WINDOW_DAYS, settled) || settled !== q.trim() ? ' · searching…' : ''}
              </span>
            </div>
            {rows.length === 0 ? (
              <p class="muted" data-testid="sessions-no-match">
                No session matches “{settled}”.
              </p>
            ) : (
              <div class="scroll" ref={table}>
                <table class="dense sessions" data-testid="sessions">
                  <caption class="visually-hidden">Sessions, sortable by each column; open one for its details</caption>
                  <thead>
                    <tr>
                      <SortHeader id="project" {...head}>Project</SortHeader>
                      <SortHeader id="models" {...head}>Models</SortHeader>
                      <SortHeader id="last" title="The session's last request (and when it started)" {...head}>Last active</SortHeader>
                      <SortHeader id="requests" num {...head}>Requests</SortHeader>
                      <SortHeader id="tokens" num title="Input / output tokens (cache reads and writes not included)" {...head}>Tokens in / out</SortHeader>
                      <SortHeader id="cache" num title="Share of the prompt read from the cache (higher is cheaper)" {...head}>Cache read</SortHeader>
                      <SortHeader id="subagent" num title="What the session's subagents cost (part of the session's cost)" {...head}>Subagents</SortHeader>
                      <SortHeader id="cost" num {...head}>Cost</SortHeader>
                    </tr>
                  </thead>
                  <tbody>
                    {rows.map((s) => (
                      <tr
                        class="clickable"
                        data-testid="session-row"
                        data-session-id={s.session_id}
                        key={s.session_id}
                        onClick={() => open(s.session_id)}
                      >
                        <td class="project">
                          <span class="line" data-testid="session-project">
                            <ProjectName p={s.project} sessionId={s.session_id} />
                          </span>
                          <button
                            type="button"
                            class="linklike mono sub"
                            title={s.session_id}
                            aria-label={`Open session ${s.session_id}`}
                            data-testid="session-open"
                            onClick={(e) => {
                              e.stopPropagation();
                              open(s.session_id);
                            }}
                          >
                            {short(s.session_id)}
                          </button>
                        </td>
                        <td class="models-cell">
                          <Models models={s.models} labels={labels} testid="session-models" />
                        </td>
                        <td class="time" title={`${localTime(s.first_at)} – ${localTime(s.last_at)}`}>
                          <span class="line" data-testid="session-last">{shortTime(s.last_at)}</span>
                          {shortTime(s.first_at) !== shortTime(s.last_at) && (
                            <span class="sub muted" data-testid="session-first">
                              started{' '}
                              {new Date(s.first_at).toDateString() === new Date(s.last_at).toDateString()
                                ? clockTime(s.first_at)
                                : shortTime(s.first_at)}
                            </span>
                          )}
                        </td>
                        <td class="num">
                          <span class="line" data-testid="session-requests">{count(s.requests)}</span>
                          {s.errors > 0 && (
                            <span class="sub errors-note" data-testid="session-errors">
                              {count(s.errors)} failed
                            </span>
                          )}
                          {s.compactions > 0 && (
                            <span class="sub muted" data-testid="session-compactions">
                              {plural(s.compactions, 'compaction', 'compactions')}
                            </span>
                          )}
                        </td>
                        <td
                          class="num"
                          title={`${count(s.input_tokens)} input and ${count(s.output_tokens)} output tokens`}
                        >
                          <span data-testid="session-input">{compact(s.input_tokens)}</span>
                          <span class="muted"> / </span>
                          <span data-testid="session-output">{compact(s.output_tokens)}</span>
                        </td>
                        <td
                          class="num"
                          title={`${count(s.cache_read_tokens)} tokens read from the cache, ${count(s.cache_write_tokens)} written to it`}
                        >
                          <span class="line" data-testid="session-cache-ratio">{ratio(s.cache_read_ratio)}</span>
                          {s.cache_read_tokens > 0 && (
                            <span class="sub muted">
                              <span data-testid="session-cache-read">{compact(s.cache_read_tokens)}</span> read
                            </span>
                          )}
                        </td>
                        <td class="num">
                          <span
                            class={s.subagent_requests === 0 ? 'line muted' : 'line'}
                            data-testid="session-subagent-cost"
                          >
                            {money(s.subagent_cost_micro_usd)}
                          </span>
                          {s.subagent_requests > 0 && (
                            <span class="sub muted">{plural(s.subagent_requests, 'request', 'requests')}</span>
                          )}
                        </td>
                        <td class="num cost" data-testid="session-cost">{money(s.cost_micro_usd)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </>
        )
      )}
    </>
  );
}

/** The request's class; an older record without one is the subagent's when it names an
 *  agent, else the main conversation's. */
const classOf = (r: SessionRequest) => r.request_class ?? (r.agent_id ? 'subagent' : 'main');

function agentName(a: AgentUsage): string {
  if (a.kind === 'main' || a.agent_id === null) return 'Main conversation';
  return `Subagent ${short(a.agent_id)}`;
}

function SessionPanel({ token, tick, id, back }: { token: string; tick: unknown; id: string; back: () => void }) {
  const path = insightSessionPath(id);
  const read = useAppGet<SessionDetail>(token, path, tick);
  const d = read.dataPath === path ? read.data : null;
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [id]);
  const s = d?.session;
  const requestLabels = modelLabels([...new Set(d?.requests.map((r) => r.model) ?? [])]);
  return (
    <section class="stack" aria-labelledby="h-session" data-testid="session-detail" data-session-id={id}>
      <div class="row">
        <button type="button" class="secondary" data-testid="session-back" onClick={back}>
          ← Back to sessions
        </button>
      </div>
      <h2 id="h-session" tabIndex={-1} ref={heading}>
        Session <span class="mono" title={id}>{short(id)}</span>
        {s && (
          <>
            {' · '}
            <ProjectName p={s.project} sessionId={s.session_id} />
          </>
        )}
      </h2>
      {read.error?.status === 404 ? (
        <p class="banner warn" data-testid="session-not-found">
          Gatehouse has no record of this session (it may be older than the usage it keeps).
        </p>
      ) : (
        read.error && (
          <p class="banner error" role="alert" data-testid="session-error">
            Could not read the session: {read.error.message}
          </p>
        )
      )}
      {read.loading && <p class="muted">Loading…</p>}
      {d && s && (
        <>
          <dl class="facts card" data-testid="session-summary">
            <dt>Project</dt>
            <dd>
              {s.project.known ? (
                <>
                  {s.project.name}
                  {s.project.path && <span class="muted mono small"> {s.project.path}</span>}
                </>
              ) : (
                <span class="muted">Unknown: no Claude Code transcript on this computer names this session's folder.</span>
              )}
            </dd>
            <dt>Session id</dt>
            <dd class="mono" data-testid="session-detail-id">{s.session_id}</dd>
            <dt>When</dt>
            <dd title={`${localTime(s.first_at)} – ${localTime(s.last_at)}`} data-testid="session-detail-when">
              {timeRange(s.first_at, s.last_at)}
              {shortTime(s.first_at) !== shortTime(s.last_at) && (
                <span class="muted"> ({span(new Date(s.last_at).getTime() - new Date(s.first_at).getTime())})</span>
              )}
            </dd>
            <dt>Cost</dt>
            <dd>
              <strong data-testid="session-detail-cost">{money(s.cost_micro_usd)}</strong>
              {s.subagent_requests > 0 ? (
                <span class="muted">
                  , of which subagents <span data-testid="session-detail-subagent-cost">{money(s.subagent_cost_micro_usd)}</span> in{' '}
                  {plural(s.subagent_requests, 'request', 'requests')}
                </span>
              ) : (
                <span class="muted">, no subagents</span>
              )}
            </dd>
            <dt>Requests</dt>
            <dd>
              <span data-testid="session-detail-requests">{count(s.requests)}</span>
              {s.errors > 0 && <span class="error-text"> · {count(s.errors)} failed</span>}
              {s.compactions > 0 && (
                <span class="muted">
                  {' · '}
                  <span data-testid="session-detail-compactions">{plural(s.compactions, 'compaction', 'compactions')}</span>
                </span>
              )}
            </dd>
            <dt>Models</dt>
            <dd class="mono">{s.models.join(', ') || '—'}</dd>
            <dt>Tokens</dt>
            <dd>
              {count(s.input_tokens)} in · {count(s.output_tokens)} out · {count(s.cache_read_tokens)} cache read ·{' '}
              {count(s.cache_write_tokens)} cache write
            </dd>
            <dt>Cache read</dt>
            <dd data-testid="session-detail-cache-ratio">
              {s.cache_read_ratio === null ? '—' : `${ratio(s.cache_read_ratio)} of the prompt came from the cache`}
            </dd>
          </dl>
          <section class="stack" aria-labelledby="h-agents">
            <h3 id="h-agents">Main conversation and subagents</h3>
            <div class="scroll">
              <table class="dense" data-testid="session-agents">
                <thead>
                  <tr>
                    <th scope="col">Agent</th>
                    <th scope="col" class="num">Requests</th>
                    <th scope="col" class="num">In</th>
                    <th scope="col" class="num">Out</th>
                    <th scope="col" class="num">Cache read</th>
                    <th scope="col" class="num">Cache write</th>
                    <th scope="col" class="num">Cost</th>
                  </tr>
                </thead>
                <tbody>
                  {d.agents.map((a) => (
                    <tr data-testid="agent-row" data-kind={a.kind} data-agent-id={a.agent_id ?? ''} key={a.agent_id ?? 'main'}>
                      <th
                        scope="row"
                        class={a.kind === 'main' ? 'agent main' : 'agent'}
                        title={a.agent_id ? `${a.agent_id}${a.parent_agent_id ? ` (started by ${a.parent_agent_id})` : ''}` : undefined}
                      >
                        {agentName(a)}
                      </th>
                      <td class="num" data-testid="agent-requests">{count(a.requests)}</td>
                      <td class="num">{count(a.input_tokens)}</td>
                      <td class="num">{count(a.output_tokens)}</td>
                      <td class="num">{count(a.cache_read_tokens)}</td>
                      <td class="num">{count(a.cache_write_tokens)}</td>
                      <td class="num" data-testid="agent-cost">{money(a.cost_micro_usd)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </section>
          <section class="stack" aria-labelledby="h-session-requests">
            <h3 id="h-session-requests">Requests, newest first</h3>
            {d.requests.length === 0 ? (
              <p class="muted">No requests.</p>
            ) : (
              <div class="scroll">
                <table class="dense" data-testid="session-requests-table">
                  <thead>
                    <tr>
                      <th scope="col">Time</th>
                      <th scope="col">Class</th>
                      <th scope="col">Model</th>
                      <th scope="col" class="num">Status</th>
                      <th scope="col" class="num" title="Input / output tokens">Tokens in / out</th>
                      <th scope="col" class="num" title="Tokens read from the cache / written to it">Cache read / write</th>
                      <th scope="col" class="num">Latency</th>
                      <th scope="col">Upstream</th>
                      <th scope="col" class="num">Cost</th>
                    </tr>
                  </thead>
                  <tbody>
                    {d.requests.map((r) => (
                      <tr
                        data-testid="request-row"
                        data-request-id={r.request_id}
                        data-class={r.request_class ?? 'none'}
                        key={r.request_id}
                      >
                        <td class="time" title={`${localTime(r.at)} · request ${r.request_id}`}>{shortTime(r.at)}</td>
                        <td>
                          <span
                            class={`badge class-${classOf(r)}`}
                            data-testid="request-class"
                            title={r.agent_id ? `agent ${r.agent_id}` : undefined}
                          >
                            {classOf(r)}
                          </span>
                        </td>
                        <td class="mono model-name" title={r.model}>{requestLabels.get(r.model) ?? r.model}</td>
                        <td class="num">
                          <span class={r.status < 400 ? 'badge ok' : 'badge bad'}>{r.status}</span>
                        </td>
                        <td class="num" title={`${count(r.input_tokens)} in / ${count(r.output_tokens)} out`}>
                          {compact(r.input_tokens)} <span class="muted">/</span> {compact(r.output_tokens)}
                        </td>
                        <td class="num" title={`${count(r.cache_read_tokens)} read / ${count(r.cache_write_tokens)} written`}>
                          {compact(r.cache_read_tokens)} <span class="muted">/</span> {compact(r.cache_write_tokens)}
                        </td>
                        <td class="num" title={`${count(r.latency_ms)} ms`}>{latency(r.latency_ms)}</td>
                        <td class="upstream" title={r.upstream ?? undefined}>{r.upstream ?? '—'}</td>
                        <td class="num" data-testid="request-cost">{money(r.cost_micro_usd)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
            {d.requests.length >= 500 && <p class="muted small">The newest 500 requests are shown.</p>}
          </section>
        </>
      )}
    </section>
  );
}

export function SessionsView({ token, tick, go }: { token: string; tick: unknown; go: Go }) {
  const [q, setQ] = useState(takeSessionSearch);
  const [openId, setOpenId] = useState<string | null>(null);
  const [lastOpened, setLastOpened] = useState<string | null>(null);
  if (openId) {
    return (
      <SessionPanel
        token={token}
        tick={tick}
        id={openId}
        back={() => {
          setLastOpened(openId);
          setOpenId(null);
        }}
      />
    );
  }
  return (
    <section class="stack" aria-labelledby="h-sessions" data-testid="sessions-view">
      <div class="view-head">
        <h2 id="h-sessions">Sessions</h2>
        <span class="muted small">Claude Code's sessions over the last {WINDOW_DAYS} days; open one for its requests and subagents</span>
      </div>
      <SessionList token={token} tick={tick} go={go} q={q} setQ={setQ} open={setOpenId} focusId={lastOpened} />
      <ExportForm token={token} />
    </section>
  );
}
