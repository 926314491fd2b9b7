// Audit: every change made through the admin API, newest first, filtered by actor, action
// and target; "Load more" pages on with `after_id`; Export CSV downloads every matching
// row (the same filters, `format=csv`).

import { useEffect, useState } from 'preact/hooks';

import { type AuditEvent, ORG, type Page, errorText, get, query } from '../api';
import { Empty, ErrorLine, Loading } from '../ui';
import { useDebounced } from '../../views/common';
import { localTime, shortTime } from '../../format';

const PAGE = 50;
const ACTIONS = ['spend_limit.upsert', 'spend_limit.delete', 'user.sessions_revoke'];

function summary(v: Record<string, unknown> | null): string {
  if (!v) return '—';
  const parts: string[] = [];
  const scope = v.scope as Record<string, unknown> | undefined;
  if (scope && typeof scope === 'object') {
    const id = scope.user_id ?? scope.rbac_group_id;
    parts.push(id ? `${String(scope.type)} ${String(id)}` : String(scope.type));
  }
  if (v.period) parts.push(String(v.period));
  if (v.model) parts.push(String(v.model));
  if (v.amount !== undefined) parts.push(v.amount === null ? 'no cap' : `${(Number(v.amount) / 100).toFixed(2)} USD`);
  const pb = v.pooled_budget as Record<string, unknown> | null | undefined;
  if (pb && typeof pb === 'object') parts.push(`shared ${(Number(pb.amount) / 100).toFixed(2)} USD${pb.paused ? ' (paused)' : ''}`);
  if (parts.length) return parts.join(' · ');
  // Another kind of event (a session revocation: user_id, revoked_before): its fields as text.
  return Object.entries(v)
    .map(([k, x]) => `${k}: ${typeof x === 'string' ? x : JSON.stringify(x)}`)
    .join(' · ');
}

export function AuditPage() {
  const [actor, setActor] = useState('');
  const [action, setAction] = useState('');
  const [target, setTarget] = useState('');
  const key = useDebounced(JSON.stringify({ actor: actor.trim(), action: action.trim(), target_id: target.trim() }), 300);
  const filters = JSON.parse(key) as { actor: string; action: string; target_id: string };
  const [rows, setRows] = useState<AuditEvent[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const [nonce, setNonce] = useState(0);

  const load = async (after: string | null, replace: boolean, alive: () => boolean) => {
    setLoading(true);
    setError(null);
    try {
      const page = await get<Page<AuditEvent>>(`${ORG}/spend_limits/audit${query({ limit: PAGE, ...filters, after_id: after })}`);
      if (!alive()) return;
      setRows((r) => (replace ? page.data : [...r, ...page.data]));
      setNext(page.has_more ? (page.last_id ?? page.data[page.data.length - 1]?.id ?? null) : null);
    } catch (e) {
      if (alive()) setError(errorText(e));
    } finally {
      if (alive()) setLoading(false);
    }
  };

  useEffect(() => {
    let on = true;
    void load(null, true, () => on);
    return () => {
      on = false;
    };
  }, [key, nonce]);

  const csv = `${ORG}/spend_limits/audit${query({ ...filters, format: 'csv' })}`;
  const filtered = filters.actor !== '' || filters.action !== '' || filters.target_id !== '';
  return (
    <section class="stack" aria-labelledby="h-audit" data-page="audit">
      <div class="view-head">
        <h2 id="h-audit">Audit</h2>
        <a id="audit-export" class="button-link secondary" href={csv} download="gatehouse-audit.csv">
          Export CSV
        </a>
      </div>
      <p class="muted">Every change to limits and budgets and every session revocation, newest first, with who did it.</p>
      <form class="row" onSubmit={(e) => e.preventDefault()}>
        <label>
          Actor
          <input id="audit-actor" placeholder="e.g. oidc:alice" value={actor} onInput={(e) => setActor(e.currentTarget.value)} />
        </label>
        <label>
          Action
          <input id="audit-action" list="audit-actions" placeholder="any" value={action} onInput={(e) => setAction(e.currentTarget.value)} />
          <datalist id="audit-actions">
            {ACTIONS.map((a) => (
              <option value={a} key={a} />
            ))}
          </datalist>
        </label>
        <label>
          Target id
          <input id="audit-target" placeholder="a limit or user id" value={target} onInput={(e) => setTarget(e.currentTarget.value)} />
        </label>
      </form>
      {error && <ErrorLine error={error} retry={() => setNonce((n) => n + 1)} />}
      {loading && rows.length === 0 && <Loading what="the audit trail" />}
      {!loading && !error && rows.length === 0 && (
        <Empty testid="no-audit">
          <p>
            {filtered
              ? 'No event matches these filters.'
              : 'Nothing changed yet. Each spend limit created, changed or deleted and each session revocation will be listed here.'}
          </p>
        </Empty>
      )}
      {rows.length > 0 && (
        <div class="scroll">
          <table class="dense fixed" data-testid="audit">
            <thead>
              <tr>
                <th scope="col" class="w-time">Time</th>
                <th scope="col" class="w-actor">Actor</th>
                <th scope="col" class="w-action">Action</th>
                <th scope="col" class="w-target">Target</th>
                <th scope="col">Change</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.id} data-audit={r.id}>
                  <td class="time" title={localTime(r.created_at)}>
                    {shortTime(r.created_at)}
                  </td>
                  <td>
                    <span class="clip" title={r.actor}>
                      {r.actor}
                    </span>
                  </td>
                  <td>
                    <span class="wrap-text">{r.action}</span>
                    {r.change && <span class="sub muted small">{r.change}</span>}
                  </td>
                  <td class="mono">
                    {r.target_id && r.action.startsWith('user.') ? (
                      <a class="clip" href={`#people/${encodeURIComponent(r.target_id)}`} title={r.target_id}>
                        {r.target_id}
                      </a>
                    ) : (
                      <span class="clip" title={r.target_id ?? ''}>
                        {r.target_id ?? '—'}
                      </span>
                    )}
                  </td>
                  <td class="small">
                    {r.before && (
                      <span class="change-from wrap-text" title={JSON.stringify(r.before)}>
                        {summary(r.before)}
                      </span>
                    )}
                    {r.before && r.after && ' → '}
                    {r.after && (
                      <span class="change-to wrap-text" title={JSON.stringify(r.after)}>
                        {summary(r.after)}
                      </span>
                    )}
                    {!r.before && !r.after && <span class="muted">—</span>}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {next && (
        <div class="row">
          <button type="button" class="secondary" id="audit-more" disabled={loading} onClick={() => void load(next, false, () => true)}>
            {loading ? 'Loading…' : 'Load more'}
          </button>
        </div>
      )}
    </section>
  );
}
