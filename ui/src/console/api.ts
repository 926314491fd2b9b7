// The team console's only server: the admin API of docs/console-api.md, same-origin,
// with the console's session cookie. Every call that changes something carries the CSRF
// token `GET /v1/organizations/me` gave. A 401 anywhere means the session ended: the
// page goes back to the sign-in card.

export type Role = 'admin' | 'viewer';

export type Me = {
  type: 'admin_principal';
  actor: string;
  via: 'console' | 'session' | 'admin_key';
  role: Role;
  user: { id: string; email: string | null; name: string | null; groups: string[] } | null;
  csrf_token: string | null;
  expires_at: string | null;
};

/** A spend limit's scope, in the reference's shape. */
export type Scope =
  | { type: 'organization' }
  | { type: 'rbac_group'; rbac_group_id: string }
  | { type: 'user'; user_id: string };

export type Period = 'daily' | 'weekly' | 'monthly' | 'total';

export type PooledBudget = {
  amount: string;
  paused: boolean;
  currency?: string;
  period_to_date_spend?: string;
  pool_rule?: unknown;
};

export type SpendLimit = {
  type: 'spend_limit';
  id: string;
  scope: Scope;
  period: Period;
  /** Cents as a string; null: no cap. */
  amount: string | null;
  currency: string;
  /** A model family the limit is restricted to (absent or null: every model). */
  model?: string | null;
  created_at: string;
  updated_at: string;
  pooled_budget?: PooledBudget | null;
};

export type Page<T> = { data: T[]; has_more: boolean; first_id?: string | null; last_id?: string | null; next_page?: string | null };

/** Where a person's binding cap comes from: a scope object (`/effective`) or a word (`/overview`). */
export type Source = Scope | 'user' | 'group' | 'organization' | 'pooled' | string | null;

export type Standing = {
  scope: Scope;
  groups: string[];
  actor: { type: string; user_id: string; name: string | null; email_address: string | null; deleted?: boolean };
  amount: string | null;
  currency: string;
  period: Period;
  source: Source;
  spend_limit_id: string | null;
  period_to_date_spend?: string;
  spent_micro_usd: number;
  reserved_micro_usd: number;
  resets_at: string | null;
};

export type Upstream = {
  name: string;
  provider: string;
  state: string;
  breaker: string;
  cooling_until: string | null;
  last_status: number | null;
  last_error: string | null;
  last_ok_at: string | null;
  last_error_at: string | null;
  ttfb_p50_ms: number | null;
  ttfb_p95_ms: number | null;
  ttfb_p99_ms: number | null;
  error_rate: number | null;
  attempts: number;
  transitions: { at: string; change: string }[];
  keys?: unknown[];
};

export type Overview = {
  type: 'overview';
  generated_at: string;
  spend: {
    today_micro_usd: number;
    month_micro_usd: number;
    organization_limits: { period: Period; amount: string | null; spent_micro_usd: number; spend_limit_id: string; resets_at: string | null; model?: string | null }[];
  };
  requests: { last_24h: number; errors_24h: number; error_rate: number | null };
  nearest: { user_id: string; email: string | null; name: string | null; period: Period; amount: string | null; spent_micro_usd: number; ratio: number; source: Source }[];
  daily: { date: string; cost_micro_usd: number; requests: number; errors: number }[];
  by_model: { model: string; cost_micro_usd: number; requests: number }[];
  by_upstream: { upstream: string; cost_micro_usd: number; requests: number }[];
  upstreams: Upstream[];
};

export type User = {
  type: 'user';
  id: string;
  email: string | null;
  name: string | null;
  groups: string[];
  last_seen_at: string | null;
};

export type SessionRow = {
  session_id: string;
  first_at: string | null;
  last_at: string | null;
  models: string[];
  requests: number;
  errors: number;
  cost: string;
  [k: string]: unknown;
};

export type Person = User & {
  standings: Standing[];
  sessions: SessionRow[];
  projects: { project: string; sessions: number; cost_micro_usd: number }[];
  models: { model: string; requests: number; cost_micro_usd: number }[];
  refusals: { at: string; request_id: string; layer: string; model: string | null; status: number; message: string }[];
  sessions_revoked_before: string | null;
};

export type Preview = {
  type: 'spend_limit_preview';
  action: 'create' | 'update';
  replaces: SpendLimit | null;
  binds: { scope: unknown; people: number; sample: string[] };
  message: string;
};

export type AuditEvent = {
  type: 'audit_event';
  id: string;
  created_at: string;
  actor: string;
  action: string;
  change: string | null;
  target_id: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  reason?: string | null;
};

export type UsageRow = {
  key: string;
  requests: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_creation_tokens: number;
  cost_micro_usd: number;
};

export type UsageReport = {
  type: 'usage_report';
  group_by: string;
  starting_at: string;
  ending_at: string;
  data: UsageRow[];
  total: Partial<UsageRow>;
};

export type Policy = {
  index: number;
  match: { groups?: string[]; email_domains?: string[]; [k: string]: unknown };
  checksum: string;
  etag: string;
  settings: unknown;
};

export type PolicyPreview = { user: Record<string, unknown> | null; matched: number[]; settings: unknown; checksum: string | null; etag: string | null };

/** A refusal from the API, with its envelope's message. */
export class ApiError extends Error {
  constructor(
    public status: number,
    public kind: string,
    message: string,
  ) {
    super(message);
  }
}

export const ORG = '/v1/organizations';

let csrf: string | null = null;
let onSignedOut: () => void = () => {};

export function setCsrf(token: string | null) {
  csrf = token;
}

/** What the page does when a call answers 401 (the session ended). */
export function onUnauthorized(f: () => void) {
  onSignedOut = f;
}

async function failure(resp: Response): Promise<ApiError> {
  let kind = 'api_error';
  let message = `HTTP ${resp.status}`;
  try {
    const body = (await resp.json()) as { error?: { type?: unknown; message?: unknown } };
    if (body && typeof body.error === 'object' && body.error) {
      if (typeof body.error.type === 'string') kind = body.error.type;
      if (typeof body.error.message === 'string' && body.error.message !== '') message = body.error.message;
    }
  } catch {
    // Not the envelope (a proxy's page): keep the status.
  }
  return new ApiError(resp.status, kind, message);
}

/**
 * One call. `quiet401`: a 401 is reported to the caller only (the first `/me`), not
 * turned into the sign-in card.
 */
export async function call<T>(method: string, path: string, body?: unknown, quiet401 = false): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD' && csrf) headers['x-csrf-token'] = csrf;
  let resp: Response;
  try {
    resp = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      cache: 'no-store',
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, 'network', 'the gateway did not answer');
  }
  if (!resp.ok) {
    const e = await failure(resp);
    if (resp.status === 401 && !quiet401) onSignedOut();
    throw e;
  }
  const text = await resp.text();
  if (text === '') return null as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new ApiError(resp.status, 'api_error', 'the gateway answered something that is not JSON');
  }
}

export const get = <T>(path: string) => call<T>('GET', path);

/** A query string from pairs, leaving out empty values; arrays repeat their key. */
export function query(params: Record<string, string | number | null | undefined | (string | number)[]>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => q.append(k, String(x)));
    else q.append(k, String(v));
  }
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  if (e instanceof Error) return e.message;
  return 'something went wrong';
}
