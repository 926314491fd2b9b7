// Pieces every console page shares: loading / error / empty states, usage bars, names
// from the IdP (always text, clipped so a long one cannot break the layout), the confirm
// dialog and a key/value tree for JSON answers.
//
// Names, emails and groups come from the company IdP and are treated as hostile: they are
// only ever Preact text children or attribute values (title), never markup.

import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

import type { Period, Scope, Source } from './api';
import { money, percent } from '../format';

/** Micro-USD from a spend limit's `amount` (cents as a string); null: no cap. */
export function centsToMicro(amount: string | null | undefined): number | null {
  if (amount === null || amount === undefined || amount === '') return null;
  const n = Number(amount);
  return Number.isFinite(n) ? Math.round(n * 10_000) : null;
}

/** `$12.50` from cents as a string (`—` for none). */
export function cents(amount: string | null | undefined): string {
  const m = centsToMicro(amount);
  return m === null ? '—' : money(m);
}

/** Dollars typed in a form (`12.5`, `$1,000`) as a cents string, or null when not an amount. */
export function dollarsToCents(text: string): string | null {
  const t = text.replace(/[$,\s]/g, '');
  if (!/^\d+(\.\d{0,2})?$/.test(t)) return null;
  const [whole, frac = ''] = t.split('.');
  const c = BigInt(whole) * 100n + BigInt((frac + '00').slice(0, 2));
  return c.toString();
}

/** A cents string as dollars for a form field: `1250` → `12.50`. */
export function centsToDollars(amount: string | null | undefined): string {
  if (!amount || !/^\d+$/.test(amount)) return '';
  const c = BigInt(amount);
  const d = c / 100n;
  const r = c % 100n;
  return r === 0n ? d.toString() : `${d}.${r.toString().padStart(2, '0')}`;
}

export const PERIOD_LABEL: Record<string, string> = {
  daily: 'Daily',
  weekly: 'Weekly',
  monthly: 'Monthly',
  total: 'Total',
};

export function periodLabel(p: Period | string): string {
  return PERIOD_LABEL[p] ?? p;
}

/** Where a binding cap comes from, in words: own / group eng / organization / pooled. */
export function sourceLabel(s: Source | undefined): string {
  if (s === null || s === undefined) return 'no cap';
  if (typeof s === 'string') {
    if (s === 'user') return 'own';
    return s;
  }
  const scope = s as Scope;
  if (scope.type === 'user') return 'own';
  if (scope.type === 'rbac_group') return `group ${scope.rbac_group_id}`;
  if (scope.type === 'organization') return 'organization';
  return String((scope as { type?: unknown }).type ?? '—');
}

export function scopeLabel(s: Scope | null | undefined): string {
  if (!s) return '—';
  if (s.type === 'organization') return 'Organization';
  if (s.type === 'rbac_group') return `Group ${s.rbac_group_id}`;
  if (s.type === 'user') return `Person ${s.user_id}`;
  return String((s as { type?: unknown }).type ?? '—');
}

export function modelName(m: string | null | undefined): string {
  return m ? m : 'All models';
}

export function Loading({ what }: { what?: string }) {
  return (
    <p class="muted loading-line" role="status">
      <span class="spinner" aria-hidden="true" /> Loading{what ? ` ${what}` : ''}…
    </p>
  );
}

export function ErrorLine({ error, retry }: { error: string; retry?: () => void }) {
  return (
    <p class="banner error with-action" role="alert" data-testid="load-error">
      <span class="banner-text">Could not read this: {error}</span>
      {retry && (
        <button type="button" class="secondary compact" onClick={retry}>
          Try again
        </button>
      )}
    </p>
  );
}

export function Empty({ children, testid }: { children: ComponentChildren; testid?: string }) {
  return (
    <div class="card empty" data-testid={testid ?? 'empty'}>
      {children}
    </div>
  );
}

export function ReadOnlyBadge() {
  return (
    <span class="badge readonly-badge" title="Viewers read everything and change nothing">
      read-only (viewer)
    </span>
  );
}

/** A person as text: the name (or id) with the email under it, both clipped. */
export function PersonName({ id, name, email, link = true }: { id: string; name?: string | null; email?: string | null; link?: boolean }) {
  const main = name && name.trim() !== '' ? name : id;
  return (
    <span class="person">
      {link ? (
        <a class="clip" href={`#people/${encodeURIComponent(id)}`} title={main}>
          {main}
        </a>
      ) : (
        <span class="clip strong" title={main}>
          {main}
        </span>
      )}
      {email && (
        <span class="clip muted small" title={email}>
          {email}
        </span>
      )}
    </span>
  );
}

export function Groups({ groups }: { groups: string[] | null | undefined }) {
  if (!groups || groups.length === 0) return <span class="muted">none</span>;
  return (
    <span class="groups">
      {groups.map((g, i) => (
        <span class="chip group-chip" title={g} key={`${i}-${g}`}>
          {g === '' ? '(none)' : g}
        </span>
      ))}
    </span>
  );
}

/** Spend against a cap: a bar with the figures; without a cap, the spend alone. */
export function UsageBar({ spent, cap, label, testid }: { spent: number; cap: number | null; label?: string; testid?: string }) {
  const r = cap && cap > 0 ? spent / cap : null;
  const pct = r === null ? 0 : Math.min(100, percent(r));
  const cls = r === null ? 'fill' : r >= 1 ? 'fill crit' : r >= 0.8 ? 'fill warn' : 'fill';
  return (
    <div class="usage" data-testid={testid}>
      <div
        class={cap === null ? 'bar empty' : 'bar'}
        role="progressbar"
        aria-label={label ?? 'spend'}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={pct}
      >
        <div class={cls} style={{ width: `${pct}%` }} />
      </div>
      <span class="usage-figures small">
        {money(spent)} {cap === null ? <span class="muted">(no cap)</span> : <> of {money(cap)} · {percent(r ?? 0)}%</>}
      </span>
    </div>
  );
}

/** A modal confirm: says what will happen, then #confirm / #cancel. */
export function ConfirmDialog({
  title,
  children,
  confirmLabel,
  danger,
  busy,
  error,
  onConfirm,
  onCancel,
}: {
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  busy?: boolean;
  error?: string | null;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    cancel.current?.focus();
    const key = (e: KeyboardEvent) => {
      if (e.key === 'Escape') onCancel();
    };
    window.addEventListener('keydown', key);
    return () => window.removeEventListener('keydown', key);
  }, [onCancel]);
  return (
    <div class="modal-backdrop">
      <div class="modal card" role="dialog" aria-modal="true" aria-labelledby="confirm-title" data-testid="confirm-dialog">
        <h2 id="confirm-title">{title}</h2>
        <div class="modal-body">{children}</div>
        {error && (
          <p class="banner error" role="alert" data-testid="dialog-error">
            {error}
          </p>
        )}
        <div class="modal-actions">
          <button type="button" id="cancel" class="secondary" ref={cancel} onClick={onCancel}>
            Cancel
          </button>
          <button type="button" id="confirm" class={danger ? 'danger' : undefined} disabled={busy} onClick={onConfirm}>
            {busy ? 'Working…' : confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}

/** Any JSON value as a key/value tree (text only). */
export function JsonTree({ value, depth = 0 }: { value: unknown; depth?: number }) {
  if (value === null) return <span class="json-null">null</span>;
  if (typeof value === 'string') return <span class="json-string">{value}</span>;
  if (typeof value === 'number' || typeof value === 'boolean') return <span class="json-scalar">{String(value)}</span>;
  if (Array.isArray(value)) {
    if (value.length === 0) return <span class="muted">[]</span>;
    if (value.every((v) => v === null || typeof v !== 'object'))
      return <span class="json-list">{value.map((v) => (v === null ? 'null' : String(v))).join(', ')}</span>;
    return (
      <ol class="json-tree" start={0}>
        {value.map((v, i) => (
          <li key={i}>
            <JsonTree value={v} depth={depth + 1} />
          </li>
        ))}
      </ol>
    );
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) return <span class="muted">{'{}'}</span>;
    return (
      <dl class="json-tree">
        {entries.map(([k, v]) => (
          <div class="json-entry" key={k}>
            <dt>{k}</dt>
            <dd>
              <JsonTree value={v} depth={depth + 1} />
            </dd>
          </div>
        ))}
      </dl>
    );
  }
  return <span>{String(value)}</span>;
}

/**
 * Keyset paging: the tokens of the pages seen so far, so Previous works too. A new `key`
 * (a new search or filter) starts again at the first page.
 */
export function usePages(key = '') {
  const [state, setState] = useState<{ key: string; stack: string[] }>({ key, stack: [] });
  const stack = state.key === key ? state.stack : [];
  return {
    token: stack.length ? stack[stack.length - 1] : null,
    index: stack.length,
    next: (t: string) => setState({ key, stack: [...stack, t] }),
    prev: () => setState({ key, stack: stack.slice(0, -1) }),
    reset: () => setState({ key, stack: [] }),
  };
}

/** Previous / next for the API's pages (`page` tokens or `after_id`). */
export function Pager({
  pages,
  nextToken,
  testid,
}: {
  pages: ReturnType<typeof usePages>;
  /** The token of the next page; null: this is the last. */
  nextToken: string | null | undefined;
  testid?: string;
}) {
  if (pages.index === 0 && !nextToken) return null;
  return (
    <div class="pager" data-testid={testid ?? 'pager'}>
      <button type="button" class="secondary compact" disabled={pages.index === 0} onClick={pages.prev}>
        Previous
      </button>
      <span class="muted small">Page {pages.index + 1}</span>
      <button
        type="button"
        class="secondary compact"
        disabled={!nextToken}
        onClick={() => nextToken && pages.next(nextToken)}
        data-testid="next-page"
      >
        Next
      </button>
    </div>
  );
}
