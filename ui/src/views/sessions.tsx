// Sessions (desktop only): Claude Code's sessions over the last 30 days, sortable and
// searchable (id, project, model); a row opens the session: its main conversation against
// its subagents, and its requests. The export sits above the list.

import { useEffect, useRef, useState } from 'preact/hooks';

import {
  type AgentUsage,
  type InsightSession,
  type InsightSessions,
  type SessionDetail,
  insightSessionPath,
  insightSessionsPath,
} from '../api';
import { count, localTime, money, ratio, shortTime } from '../format';
import { useAppGet } from '../hooks';
import { type Go, NoSessions, WINDOW_DAYS, useDebounced } from './common';
import { ExportForm } from './export';
import { SortHeader, type SortValue, sortRows, useSort } from './table';

const SEARCH_DEBOUNCE_MS = 300;

type Col =
  | 'project'
  | 'session'
  | 'first'
  | 'last'
  | 'models'
  | 'requests'
  | 'input'
  | 'output'
  | 'cache_read'
  | 'cache_write'
  | 'cache'
  | 'cost'
  | 'subagent'
  | 'compactions';

const TEXT_COLS: readonly Col[] = ['project', 'session', 'models'];

const time = (iso: string | null) => (iso ? new Date(iso).getTime() : null);

function valueOf(s: InsightSession, col: Col): SortValue {
  switch (col) {
    case 'project':
      return s.project.name;
    case 'session':
      return s.session_id;
    case 'first':
      return time(s.first_at);
    case 'last':
      return time(s.last_at);
    case 'models':
      return s.models.join(', ');
    case 'requests':
      return s.requests;
    case 'input':
      return s.input_tokens;
    case 'output':
      return s.output_tokens;
    case 'cache_read':
      return s.cache_read_tokens;
    case 'cache_write':
      return s.cache_write_tokens;
    case 'cache':
      return s.cache_read_ratio;
    case 'cost':
      return s.cost_micro_usd;
    case 'subagent':
      return s.subagent_cost_micro_usd;
    case 'compactions':
      return s.compactions;
  }
}

const short = (id: string) => id.slice(0, 8);

function ProjectName({ p }: { p: InsightSession['project'] }) {
  return (
    <span class={p.known ? undefined : 'muted'} title={p.path ?? p.key}>
      {p.name}
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
              <label>
                Search sessions
                <input
                  type="search"
                  value={q}
                  placeholder="id, project or model"
                  data-testid="session-search"
                  onInput={(e) => setQ(e.currentTarget.value)}
                />
              </label>
              <span class="muted small" role="status" data-testid="sessions-count">
                {data.sessions.length < data.total
                  ? `The newest ${count(data.sessions.length)} of ${count(data.total)} sessions`
                  : `${count(data.total)} ${data.total === 1 ? 'session' : 'sessions'}`}
                {read.dataPath !== insightSessionsPath(WINDOW_DAYS, settled) || settled !== q.trim() ? ' · searching…' : ''}
              </span>
            </div>
            {rows.length === 0 ? (
              <p class="muted" data-testid="sessions-no-match">
                No session matches “{settled}”.
              </p>
            ) : (
              <div class="scroll" ref={table}>
                <table class="dense" data-testid="sessions">
                  <caption class="visually-hidden">Sessions, sortable by each column; open one for its details</caption>
                  <thead>
                    <tr>
                      <SortHeader id="project" {...head}>Project</SortHeader>
                      <SortHeader id="session" {...head}>Session</SortHeader>
                      <SortHeader id="last" title="Last request" {...head}>Last</SortHeader>
                      <SortHeader id="cost" num {...head}>Cost</SortHeader>
                      <SortHeader id="subagent" num title="Cost of the subagents' requests" {...head}>Subagents</SortHeader>
                      <SortHeader id="requests" num {...head}>Requests</SortHeader>
                      <SortHeader id="cache" num title="Share of the prompt read from the cache" {...head}>Cache %</SortHeader>
                      <SortHeader id="compactions" num {...head}>Compactions</SortHeader>
                      <SortHeader id="first" title="First request" {...head}>First</SortHeader>
                      <SortHeader id="models" {...head}>Models</SortHeader>
                      <SortHeader id="input" num title="Input tokens" {...head}>In</SortHeader>
                      <SortHeader id="output" num title="Output tokens" {...head}>Out</SortHeader>
                      <SortHeader id="cache_read" num title="Cache-read tokens" {...head}>Cache read</SortHeader>
                      <SortHeader id="cache_write" num title="Cache-write tokens (5-minute and 1-hour)" {...head}>Cache write</SortHeader>
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
                        <td class="project" data-testid="session-project">
                          <ProjectName p={s.project} />
                        </td>
                        <td>
                          <button
                            type="button"
                            class="linklike mono"
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
                        <td class="time" title={localTime(s.last_at)} data-testid="session-last">{shortTime(s.last_at)}</td>
                        <td class="num" data-testid="session-cost">{money(s.cost_micro_usd)}</td>
                        <td class="num" data-testid="session-subagent-cost" title={`${count(s.subagent_requests)} subagent ${s.subagent_requests === 1 ? 'request' : 'requests'}`}>
                          {money(s.subagent_cost_micro_usd)}
                        </td>
                        <td class="num">
                          <span data-testid="session-requests">{count(s.requests)}</span>
                          {s.errors > 0 && (
                            <span class="errors-note" data-testid="session-errors">
                              {count(s.errors)} failed
                            </span>
                          )}
                        </td>
                        <td class="num" data-testid="session-cache-ratio">{ratio(s.cache_read_ratio)}</td>
                        <td class="num" data-testid="session-compactions">{count(s.compactions)}</td>
                        <td class="time" title={localTime(s.first_at)} data-testid="session-first">{shortTime(s.first_at)}</td>
                        <td class="small">
                          <span class="mono models" data-testid="session-models">{s.models.join(', ')}</span>
                        </td>
                        <td class="num" data-testid="session-input">{count(s.input_tokens)}</td>
                        <td class="num" data-testid="session-output">{count(s.output_tokens)}</td>
                        <td class="num" data-testid="session-cache-read">{count(s.cache_read_tokens)}</td>
                        <td class="num" data-testid="session-cache-write">{count(s.cache_write_tokens)}</td>
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
            <ProjectName p={s.project} />
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
              <ProjectName p={s.project} />
              {s.project.path && <span class="muted mono small"> {s.project.path}</span>}
            </dd>
            <dt>Session id</dt>
            <dd class="mono" data-testid="session-detail-id">{s.session_id}</dd>
            <dt>Requests</dt>
            <dd>
              <span data-testid="session-detail-requests">{count(s.requests)}</span>
              {s.errors > 0 && <span class="muted"> ({count(s.errors)} failed)</span>}
              <span class="muted">
                {' '}
                · {localTime(s.first_at)} to {localTime(s.last_at)}
              </span>
            </dd>
            <dt>Models</dt>
            <dd class="mono">{s.models.join(', ') || '—'}</dd>
            <dt>Tokens</dt>
            <dd>
              {count(s.input_tokens)} in · {count(s.output_tokens)} out · {count(s.cache_read_tokens)} cache read ·{' '}
              {count(s.cache_write_tokens)} cache write
            </dd>
            <dt>Cache read</dt>
            <dd data-testid="session-detail-cache-ratio">{ratio(s.cache_read_ratio)} of the prompt</dd>
            <dt>Cost</dt>
            <dd>
              <strong data-testid="session-detail-cost">{money(s.cost_micro_usd)}</strong>
              <span class="muted">
                , of which subagents <span data-testid="session-detail-subagent-cost">{money(s.subagent_cost_micro_usd)}</span> in{' '}
                {count(s.subagent_requests)} {s.subagent_requests === 1 ? 'request' : 'requests'}
              </span>
            </dd>
            <dt>Compactions</dt>
            <dd data-testid="session-detail-compactions">{count(s.compactions)}</dd>
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
                      <th scope="col" class="num">Cost</th>
                      <th scope="col" class="num">Status</th>
                      <th scope="col" class="num">In</th>
                      <th scope="col" class="num">Out</th>
                      <th scope="col" class="num">Cache read</th>
                      <th scope="col" class="num">Cache write</th>
                      <th scope="col" class="num">Latency</th>
                      <th scope="col">Upstream</th>
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
                        <td class="time" title={`${localTime(r.at)} · ${r.request_id}`}>{shortTime(r.at)}</td>
                        <td>
                          <span
                            class={`badge class-${r.request_class ?? 'none'}`}
                            data-testid="request-class"
                            title={r.agent_id ? `agent ${r.agent_id}` : undefined}
                          >
                            {r.request_class ?? (r.agent_id ? 'subagent' : 'main')}
                          </span>
                        </td>
                        <td class="mono">{r.model}</td>
                        <td class="num" data-testid="request-cost">{money(r.cost_micro_usd)}</td>
                        <td class="num">
                          <span class={r.status < 400 ? 'badge ok' : 'badge bad'}>{r.status}</span>
                        </td>
                        <td class="num">{count(r.input_tokens)}</td>
                        <td class="num">{count(r.output_tokens)}</td>
                        <td class="num">{count(r.cache_read_tokens)}</td>
                        <td class="num">{count(r.cache_write_tokens)}</td>
                        <td class="num">{count(r.latency_ms)} ms</td>
                        <td>{r.upstream ?? '—'}</td>
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
  const [q, setQ] = useState('');
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
        <span class="muted small">Claude Code's sessions, last {WINDOW_DAYS} days</span>
      </div>
      <SessionList token={token} tick={tick} go={go} q={q} setQ={setQ} open={setOpenId} focusId={lastOpened} />
      <ExportForm token={token} />
    </section>
  );
}
