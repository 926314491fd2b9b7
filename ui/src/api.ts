// The two APIs the dashboard reads (see the UI contract): the engine's public
// `/gatehouse/api/*` (every mode) and the desktop app's `/gatehouse/app/*`, which needs
// the per-launch app token and answers 404 on a headless server.

export type Totals = {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cost_micro_usd: number;
};

export type Meter = {
  period: 'daily' | 'weekly' | 'monthly';
  limit_micro_usd: number | null;
  spent_micro_usd: number;
  utilization: number | null;
  resets_at: string;
};

export type RecentRequest = {
  at: string;
  request_id: string;
  model: string;
  upstream: string | null;
  status: number;
  stream: boolean;
  input_tokens: number;
  output_tokens: number;
  cost_micro_usd: number;
  route_reason: string;
  latency_ms: number;
};

export type Block = {
  at: string;
  request_id: string;
  layer: 'policy' | 'catalog' | 'webhook' | 'spend' | 'paused' | 'routing' | 'rate_limit' | 'capability';
  model: string | null;
  status: number;
  message: string;
};

export type UpstreamHealth = {
  name: string;
  provider: string;
  host: string;
  state: 'healthy' | 'degraded' | 'down' | 'unknown';
  last_status: number | null;
  last_error: string | null;
  last_ok_at: string | null;
  last_error_at: string | null;
  /** The circuit breaker routing obeys. */
  breaker: 'closed' | 'open' | 'half_open';
  /** Set while a 429's cooldown runs. */
  cooling_until: string | null;
  ttfb_p50_ms: number | null;
  ttfb_p95_ms: number | null;
  /** Failed share of the last attempts (null before any). */
  error_rate: number | null;
  attempts: number;
  /** Newest first. */
  transitions: { at: string; change: string }[];
  /** A key pool's keys, by id (never the key). */
  keys?: PoolKey[];
};

export type PoolKey = {
  id: string;
  state: 'ready' | 'cooling' | 'set_aside';
  until: string | null;
  /** The status that set it aside. */
  status: number | null;
  uses: number;
  failures: number;
};

/** Prompt tokens one upstream's model answered since the gateway started (in memory). */
export type PromptCacheTally = {
  upstream: string;
  /** The model the upstream was asked for. */
  model: string;
  turns: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  uncached_tokens: number;
  /** Turns that read nothing from a cache their conversation's previous turn had. */
  breaks: number;
};

export type CacheBreakCause =
  | 'upstream_switch'
  | 'model_switch'
  | 'system_changed'
  | 'tools_changed'
  | 'expired'
  | 'unknown';

/** A conversation that lost its prompt cache, with the likely cause. */
export type CacheBreak = {
  request_id: string;
  at: string;
  session_id: string | null;
  upstream: string;
  model: string;
  cause: CacheBreakCause;
  /** One sentence, lower case first: `the conversation moved from upstream a, whose cache it had`. */
  explanation: string;
};

export type Dashboard = {
  server: {
    version: string;
    mode: 'server' | 'desktop';
    started_at: string;
    store: string;
    ready: boolean;
    paused: boolean;
  };
  detail: boolean;
  usage: { today: Totals; week: Totals; month: Totals };
  by_model: (Totals & { model: string })[];
  meters: Meter[];
  recent?: RecentRequest[];
  blocks?: Block[];
  /** Newest first; empty without detail. */
  cache_breaks?: CacheBreak[];
  prompt_cache?: PromptCacheTally[];
  upstreams: UpstreamHealth[];
};

export type LoginState = {
  state: 'signed_out' | 'pending' | 'signed_in' | 'expired';
  user_code: string | null;
  verification_uri: string | null;
  verification_uri_complete: string | null;
  expires_at: string | null;
  email: string | null;
  name: string | null;
  groups: string[];
  error: string | null;
};

export type ProviderTest = {
  ok: boolean;
  status: number | null;
  message: string;
  at: string;
};

export type Provider = {
  name: string;
  kind: 'anthropic' | 'bedrock' | 'vertex' | 'foundry' | 'preset';
  key_stored: boolean;
  preset?: string | null;
  base_url?: string | null;
  /** Claude family (or `*`) -> the provider's model. */
  model_map?: Record<string, string> | null;
  region?: string | null;
  project_id?: string | null;
  resource?: string | null;
  aws_profile?: string | null;
  /** The running gateway routes to it (false while it restarts). */
  active?: boolean;
  last_test?: ProviderTest | null;
};

/** A third-party provider the tray sets up in one step. */
export type Preset = {
  id: string;
  label: string;
  wire: 'anthropic' | 'openai';
  base_url: string;
  key: 'required' | 'optional' | 'none';
  /** Claude family (or `*`) -> the provider's model; empty ones must be filled in. */
  models: Record<string, string>;
};

export type AppState = {
  mode: 'standalone' | 'connected';
  paused: boolean;
  listen: string;
  keychain: { available: boolean; error: string | null };
  bootstrap: {
    path: string;
    present: boolean;
    error: string | null;
    central_url: string | null;
    login_notice: string | null;
  };
  locks: { mode: boolean; central_url: boolean; local_providers: boolean; claude_code: boolean };
  central: {
    url: string | null;
    reachable: boolean | null;
    last_sync_at: string | null;
    last_error: string | null;
  };
  login: LoginState;
  central_spend: null | { fetched_at: string; limits: Meter[] };
  policy: null | { fetched_at: string; checksum: string; available_models: string[] | null };
  providers: Provider[];
  presets: Preset[];
  /** The provider tried first. */
  primary: string;
  budgets: { daily_cents: number | null; weekly_cents: number | null; monthly_cents: number | null };
  start_at_login: boolean;
  /** The saved port (applies at the next start). */
  port?: number;
  claude_code: {
    status: 'not_configured' | 'configured' | 'drifted';
    settings_path: string;
    detail: string | null;
    /** Whose status line Claude Code shows (absent from an older app). */
    statusline?: 'none' | 'gatehouse' | 'other';
  };
  /** The Get started checklist (absent from an older app). */
  setup?: SetupState;
};

/** The newest request made by Claude Code (user agent `claude-cli/…`). */
export type FirstRequest = {
  at: string;
  model: string;
  cost_micro_usd: number;
  client: string;
};

export type SetupState = {
  /** No provider and not connected: show Get started first. */
  needed: boolean;
  provider_ready: boolean;
  claude_code_configured: boolean;
  first_request: FirstRequest | null;
};

/** Runs one app action; the answer replaces the app state. `false` when it failed. */
export type Act = (method: 'POST' | 'DELETE', path: string, body?: unknown) => Promise<boolean>;

/** An error the app API answered with (`{"error":{"type","message"}}`), or a network failure. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const TOKEN_KEY = 'gatehouse.app-token';

/**
 * The desktop opens `/#token=<token>`: keep the token for this tab only and take it out
 * of the address bar (and so out of history and any copied link).
 */
export function takeAppToken(): string | null {
  const m = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
  if (m) {
    try {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    } catch {
      // Storage refused (private mode): the token still works for this page load.
      history.replaceState(null, '', window.location.pathname + window.location.search);
      return decodeURIComponent(m[1]);
    }
    history.replaceState(null, '', window.location.pathname + window.location.search);
  }
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

async function failure(r: Response): Promise<ApiFailure> {
  let message = `HTTP ${r.status}`;
  try {
    const body = (await r.json()) as { error?: { message?: string } };
    if (body.error?.message) message = body.error.message;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiFailure(r.status, message);
}

export async function fetchDashboard(): Promise<Dashboard> {
  const r = await fetch('/gatehouse/api/dashboard', { cache: 'no-store' });
  if (!r.ok) throw await failure(r);
  return (await r.json()) as Dashboard;
}

/** The app state, or `null` when there is no desktop app behind this page (read-only). */
export async function fetchAppState(token: string | null): Promise<AppState | null> {
  if (!token) return null;
  const r = await fetch('/gatehouse/app/state', {
    cache: 'no-store',
    headers: { 'x-gatehouse-app-token': token },
  });
  if (r.status === 404) return null;
  if (!r.ok) throw await failure(r);
  return (await r.json()) as AppState;
}

/** One app action; the answer is the new app state. */
export async function appCall(
  token: string,
  method: 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<AppState> {
  const headers: Record<string, string> = { 'x-gatehouse-app-token': token };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(`/gatehouse/app/${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw await failure(r);
  return (await r.json()) as AppState;
}

// ---- Insight: projects, sessions, charts and the usage export (desktop only) ----

/** What configuring Claude Code would change in its settings file. */
export type ClaudeCodePreview = {
  settings_path: string;
  changes: { key: string; from: string | null; to: string | null }[];
};

export type TokenCounts = {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  /** 5-minute plus 1-hour cache writes. */
  cache_write_tokens: number;
};

/** A project is Claude Code's working directory, or `session:<id>` when unknown. */
export type ProjectRef = {
  key: string;
  name: string;
  path: string | null;
  known: boolean;
};

export type InsightProject = ProjectRef &
  TokenCounts & {
    sessions: number;
    requests: number;
    cost_today_micro_usd: number;
    /** The last 7 days, today included. */
    cost_week_micro_usd: number;
    /** The last `days` days. */
    cost_month_micro_usd: number;
    subagent_cost_micro_usd: number;
    /** Subagent cost / cost; null when the cost is 0. */
    subagent_share: number | null;
    /** cache read / (input + cache read + cache write); null when nothing was sent. */
    cache_read_ratio: number | null;
    last_at: string | null;
  };

export type InsightProjects = {
  generated_at: string;
  days: number;
  projects: InsightProject[];
};

export type InsightSession = TokenCounts & {
  session_id: string;
  project: ProjectRef;
  first_at: string;
  last_at: string;
  models: string[];
  requests: number;
  errors: number;
  cache_read_ratio: number | null;
  cost_micro_usd: number;
  subagent_requests: number;
  subagent_cost_micro_usd: number;
  compactions: number;
};

export type InsightSessions = {
  generated_at: string;
  days: number;
  /** Sessions matching, before the limit. */
  total: number;
  sessions: InsightSession[];
};

export type AgentUsage = TokenCounts & {
  agent_id: string | null;
  parent_agent_id?: string | null;
  kind: 'main' | 'subagent';
  requests: number;
  cost_micro_usd: number;
};

export type RequestClass = 'main' | 'subagent' | 'compaction' | 'workflow' | 'auxiliary';

export type SessionRequest = TokenCounts & {
  at: string;
  request_id: string;
  model: string;
  upstream: string | null;
  status: number;
  request_class: RequestClass | null;
  agent_id: string | null;
  cost_micro_usd: number;
  latency_ms: number;
};

export type SessionDetail = {
  session: InsightSession;
  agents: AgentUsage[];
  /** Newest first, at most 500. */
  requests: SessionRequest[];
};

export type ChartSeries = { name: string; cost_micro_usd: number[] };

export type InsightCharts = {
  generated_at: string;
  /** `YYYY-MM-DD` (this browser's days), oldest first. */
  days: string[];
  by_model: ChartSeries[];
  by_project: ChartSeries[];
  /** Per day; null where nothing was sent. */
  cache_read_ratio: (number | null)[];
  /** 24 entries, this browser's hours of today. */
  today_by_hour: { hour: number; requests: number; cost_micro_usd: number }[];
};

/** One app read (GET `/gatehouse/app/<path>`); errors as `ApiFailure`. */
export async function appGet<T>(token: string, path: string): Promise<T> {
  let r: Response;
  try {
    r = await fetch(`/gatehouse/app/${path}`, {
      cache: 'no-store',
      headers: { 'x-gatehouse-app-token': token },
    });
  } catch {
    throw new ApiFailure(0, 'the app did not answer');
  }
  if (!r.ok) throw await failure(r);
  return (await r.json()) as T;
}

export const fetchClaudeCodePreview = (token: string) =>
  appGet<ClaudeCodePreview>(token, 'claude-code/preview');

/** This browser's offset from UTC in minutes east, so the app counts days as the user does. */
export const tzOffset = () => -new Date().getTimezoneOffset();

export const insightProjectsPath = (days: number) => `insight/projects?days=${days}&tz=${tzOffset()}`;

export function insightSessionsPath(days: number, q: string, limit = 200): string {
  const p = new URLSearchParams({ days: String(days), q, limit: String(limit), tz: String(tzOffset()) });
  return `insight/sessions?${p.toString()}`;
}

export const insightSessionPath = (id: string) => `insight/sessions/${encodeURIComponent(id)}`;

export const insightChartsPath = (days: number) => `insight/charts?days=${days}&tz=${tzOffset()}`;

export type ExportGroup = 'raw' | 'day' | 'model' | 'project' | 'session';

export type ExportQuery = {
  /** `YYYY-MM-DD`, inclusive. */
  since: string;
  /** `YYYY-MM-DD`, inclusive. */
  until: string;
  format: 'csv' | 'json';
  group: ExportGroup;
};

/** The file name from a `Content-Disposition` header, or null. */
export function dispositionFileName(header: string | null): string | null {
  if (!header) return null;
  const star = /filename\*\s*=\s*(?:UTF-8|utf-8)''([^;]+)/.exec(header);
  if (star) {
    try {
      return decodeURIComponent(star[1].trim());
    } catch {
      // fall through to the plain form
    }
  }
  const quoted = /filename\s*=\s*"((?:[^"\\]|\\.)*)"/.exec(header);
  if (quoted) return quoted[1].replace(/\\(.)/g, '$1');
  const bare = /filename\s*=\s*([^;\s]+)/.exec(header);
  return bare ? bare[1] : null;
}

/**
 * Downloads the usage export as a file (fetch → Blob → object URL → a temporary
 * `<a download>`), named as the server says. Answers the file name.
 */
export async function downloadExport(token: string, q: ExportQuery): Promise<string> {
  const params = new URLSearchParams({
    since: q.since,
    until: q.until,
    format: q.format,
    group: q.group,
    tz: String(tzOffset()),
  });
  let r: Response;
  try {
    r = await fetch(`/gatehouse/app/usage/export?${params.toString()}`, {
      cache: 'no-store',
      headers: { 'x-gatehouse-app-token': token },
    });
  } catch {
    throw new ApiFailure(0, 'the app did not answer');
  }
  if (!r.ok) throw await failure(r);
  const name =
    dispositionFileName(r.headers.get('content-disposition')) ??
    `gatehouse-usage-${q.group}-${q.since}-${q.until}.${q.format}`;
  const blob = await r.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.rel = 'noopener';
  a.hidden = true;
  document.body.appendChild(a);
  a.click();
  a.remove();
  // Give the browser time to start the download before the URL goes.
  window.setTimeout(() => URL.revokeObjectURL(url), 30_000);
  return name;
}

export const fetchInsightProjects = (token: string, days = 30) =>
  appGet<InsightProjects>(token, insightProjectsPath(days));
export const fetchInsightSessions = (token: string, days = 30, q = '', limit = 200) =>
  appGet<InsightSessions>(token, insightSessionsPath(days, q, limit));
export const fetchInsightSession = (token: string, id: string) =>
  appGet<SessionDetail>(token, insightSessionPath(id));
export const fetchInsightCharts = (token: string, days = 30) =>
  appGet<InsightCharts>(token, insightChartsPath(days));
