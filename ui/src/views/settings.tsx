// Settings (desktop only): mode and central URL, providers (Anthropic, Bedrock, Vertex,
// Foundry; secrets kept in the keychain, never shown again, with a Test button), personal
// budgets, start at login and Claude Code's configuration.
// Choices the IT bootstrap locked are shown disabled with a lock badge.

import { useEffect, useState } from 'preact/hooks';

import type { Act, AppState } from '../api';
import { Lock, Providers } from './providers';

const toDollars = (cents: number | null) => (cents === null ? '' : (cents / 100).toFixed(2));

/** Dollars typed by a person to cents; `undefined` when it is not a valid amount. */
function toCents(text: string): number | null | undefined {
  const t = text.trim().replace(/^\$/, '');
  if (t === '') return null;
  if (!/^\d+(\.\d{1,2})?$/.test(t)) return undefined;
  return Math.round(Number.parseFloat(t) * 100);
}

function Connection({ app, act }: { app: AppState; act: Act }) {
  const [mode, setMode] = useState(app.mode);
  const [url, setUrl] = useState(app.central.url ?? '');
  useEffect(() => {
    setMode(app.mode);
    setUrl(app.central.url ?? '');
  }, [app.mode, app.central.url]);
  const save = (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = {};
    if (!app.locks.mode) body.mode = mode;
    if (!app.locks.central_url) body.central_url = url.trim() === '' ? null : url.trim();
    void act('POST', 'settings', body);
  };
  return (
    <form class="card stack" onSubmit={save} aria-labelledby="h-conn">
      <h3 id="h-conn">Connection</h3>
      <fieldset disabled={app.locks.mode} data-testid="mode-field">
        <legend>
          Mode <Lock on={app.locks.mode} />
        </legend>
        <label class="radio">
          <input type="radio" name="mode" checked={mode === 'standalone'} onChange={() => setMode('standalone')} />
          Standalone: your own provider keys
        </label>
        <label class="radio">
          <input type="radio" name="mode" checked={mode === 'connected'} onChange={() => setMode('connected')} />
          Connected: through your organisation's Gatehouse
        </label>
      </fieldset>
      <label>
        <span class="label-row">
          Central server URL <Lock on={app.locks.central_url} />
        </span>
        <input
          type="url"
          value={url}
          disabled={app.locks.central_url}
          placeholder="https://gatehouse.example.com"
          data-testid="central-url"
          onInput={(e) => setUrl(e.currentTarget.value)}
        />
      </label>
      <p class="muted small">Gateway address for Claude Code: <span class="mono">{app.listen}</span></p>
      <div class="row">
        <button type="submit" disabled={app.locks.mode && app.locks.central_url}>Save</button>
      </div>
    </form>
  );
}

function Budgets({ app, act }: { app: AppState; act: Act }) {
  const [text, setText] = useState({
    daily: toDollars(app.budgets.daily_cents),
    weekly: toDollars(app.budgets.weekly_cents),
    monthly: toDollars(app.budgets.monthly_cents),
  });
  const [error, setError] = useState<string | null>(null);
  const save = (e: Event) => {
    e.preventDefault();
    const cents = { daily: toCents(text.daily), weekly: toCents(text.weekly), monthly: toCents(text.monthly) };
    const bad = Object.entries(cents).find(([, v]) => v === undefined);
    if (bad) {
      setError(`The ${bad[0]} budget must be an amount in dollars, like 12.50 (or empty for none).`);
      return;
    }
    setError(null);
    void act('POST', 'settings', {
      budgets: { daily_cents: cents.daily, weekly_cents: cents.weekly, monthly_cents: cents.monthly },
    });
  };
  return (
    <form class="card stack" onSubmit={save} aria-labelledby="h-budgets">
      <h3 id="h-budgets">Budgets (USD, empty for none)</h3>
      <div class="row">
        {(['daily', 'weekly', 'monthly'] as const).map((p) => (
          <label key={p}>
            {p[0].toUpperCase() + p.slice(1)}
            <input
              inputMode="decimal"
              value={text[p]}
              data-testid={`budget-${p}`}
              onInput={(e) => setText({ ...text, [p]: e.currentTarget.value })}
            />
          </label>
        ))}
      </div>
      {error && <p class="error-text" role="alert">{error}</p>}
      <div class="row">
        <button type="submit">Save budgets</button>
      </div>
    </form>
  );
}

function ClaudeCode({ app, act }: { app: AppState; act: Act }) {
  const c = app.claude_code;
  const locked = app.locks.claude_code;
  const label = { not_configured: 'Not configured', configured: 'Configured', drifted: 'Changed since configured' }[c.status];
  return (
    <section class="card stack" aria-labelledby="h-cc">
      <h3 id="h-cc">
        Claude Code <Lock on={locked} />
      </h3>
      <p>
        <span class={c.status === 'configured' ? 'badge ok' : c.status === 'drifted' ? 'badge warn' : 'badge idle'} data-testid="claude-code-status">
          {label}
        </span>{' '}
        <span class="muted mono small">{c.settings_path}</span>
      </p>
      {c.detail && <p class="muted small">{c.detail}</p>}
      <div class="row">
        <button type="button" disabled={locked} data-testid="claude-code-configure" onClick={() => void act('POST', 'claude-code', { action: 'configure' })}>
          {c.status === 'not_configured' ? 'Configure Claude Code' : 'Configure again'}
        </button>
        <button type="button" class="secondary" disabled={locked || c.status === 'not_configured'} data-testid="claude-code-undo" onClick={() => void act('POST', 'claude-code', { action: 'undo' })}>
          Undo
        </button>
      </div>
    </section>
  );
}

function PortField({ app, act }: { app: AppState; act: Act }) {
  const [port, setPort] = useState(String(app.port ?? ''));
  useEffect(() => setPort(String(app.port ?? '')), [app.port]);
  return (
    <form
      class="row"
      onSubmit={(e) => {
        e.preventDefault();
        void act('POST', 'settings', { port: Number(port) });
      }}
    >
      <label>
        Local port{' '}
        <input
          type="number"
          min={1024}
          max={65535}
          value={port}
          data-testid="port"
          onInput={(e) => setPort(e.currentTarget.value)}
        />
      </label>
      <button type="submit" class="secondary" data-testid="port-save">Save</button>
      <span class="muted small">
        Now {app.listen}; a new port applies at the next start (configure Claude Code again then).
      </span>
    </form>
  );
}

export function SettingsView({ app, act }: { app: AppState; act: Act }) {
  return (
    <div class="stack">
      <h2>Settings</h2>
      {app.bootstrap.present && (
        <p class="muted small">Some choices come from your IT department ({app.bootstrap.path}).</p>
      )}
      <Connection app={app} act={act} />
      {app.mode === 'standalone' && <Providers app={app} act={act} />}
      {app.mode === 'standalone' && <Budgets app={app} act={act} />}
      <section class="card" aria-labelledby="h-start">
        <h3 id="h-start">Start</h3>
        <label class="radio">
          <input
            type="checkbox"
            checked={app.start_at_login}
            data-testid="start-at-login"
            onChange={(e) => void act('POST', 'settings', { start_at_login: e.currentTarget.checked })}
          />
          Start Gatehouse when I log in
        </label>
        <PortField app={app} act={act} />
      </section>
      <ClaudeCode app={app} act={act} />
    </div>
  );
}
