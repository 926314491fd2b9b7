// Settings (desktop only): mode and central URL, providers (Anthropic, Bedrock, Vertex,
// Foundry; secrets kept in the keychain, never shown again, with a Test button), personal
// budgets, start at login and Claude Code's configuration.
// Choices the IT bootstrap locked are shown disabled with a lock badge.

import { useEffect, useState } from 'preact/hooks';

import type { Act, AppState } from '../api';

function Lock({ on }: { on: boolean }) {
  if (!on) return null;
  return (
    <span class="lock" data-testid="lock" title="Set by your IT department">
      <svg viewBox="0 0 16 16" width="12" height="12" aria-hidden="true">
        <path d="M4 7V5a4 4 0 0 1 8 0v2h1v8H3V7h1zm2 0h4V5a2 2 0 0 0-4 0v2z" fill="currentColor" />
      </svg>
      Locked by IT
    </span>
  );
}

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

function Providers({ app, act }: { app: AppState; act: Act }) {
  const [key, setKey] = useState('');
  const locked = app.locks.local_providers;
  const add = async (e: Event) => {
    e.preventDefault();
    if (key.trim() === '') return;
    // The key is sent once and forgotten here, whatever the answer.
    const sent = key.trim();
    setKey('');
    await act('POST', 'providers', { kind: 'anthropic', api_key: sent });
  };
  return (
    <section class="card stack" aria-labelledby="h-prov">
      <h3 id="h-prov">
        Providers <Lock on={locked} />
      </h3>
      {app.providers.length === 0 ? (
        <p class="muted">No provider yet.</p>
      ) : (
        <ul class="plain">
          {app.providers.map((p) => (
            <li class="row" data-testid="provider" key={p.name}>
              <span>{p.name}</span>
              <span class="muted">{p.kind}</span>
              {p.model_map && (
                <span class="muted small mono" data-testid="model-map">
                  {Object.entries(p.model_map)
                    .map(([f, m]) => `${f} → ${m}`)
                    .join(', ')}
                </span>
              )}
              {app.primary === p.name ? (
                <span class="badge ok" data-testid="primary">
                  primary
                </span>
              ) : (
                <button
                  type="button"
                  class="secondary"
                  disabled={locked}
                  data-testid="make-primary"
                  onClick={() => void act('POST', `providers/${encodeURIComponent(p.name)}/primary`, {})}
                >
                  Use first
                </button>
              )}
              <span class={p.key_stored ? 'badge ok' : 'badge bad'} data-testid="key-state">
                {p.key_stored ? 'key stored in keychain' : 'no key stored'}
              </span>
              <button
                type="button"
                class="secondary"
                data-testid="test-provider"
                onClick={() => void act('POST', `providers/${encodeURIComponent(p.name)}/test`, {})}
              >
                Test
              </button>
              <button
                type="button"
                class="secondary"
                disabled={locked}
                onClick={() => void act('DELETE', `providers/${encodeURIComponent(p.name)}`)}
              >
                Remove
              </button>
              {p.last_test && (
                <span
                  class={p.last_test.ok ? 'badge ok' : 'badge bad'}
                  data-testid="test-result"
                  title={p.last_test.at}
                >
                  {p.last_test.ok ? 'works' : 'failed'}
                  {p.last_test.status !== null ? ` (${p.last_test.status})` : ''}: {p.last_test.message}
                </span>
              )}
            </li>
          ))}
        </ul>
      )}
      <form class="row" onSubmit={(e) => void add(e)}>
        <label>
          Anthropic API key
          <input
            type="password"
            autocomplete="off"
            spellcheck={false}
            value={key}
            disabled={locked || !app.keychain.available}
            data-testid="api-key"
            onInput={(e) => setKey(e.currentTarget.value)}
          />
        </label>
        <button type="submit" disabled={locked || !app.keychain.available || key.trim() === ''}>
          Add key
        </button>
      </form>
      <PresetProvider app={app} act={act} />
      <CloudProvider app={app} act={act} />
    </section>
  );
}

/** A preset (DeepSeek, Kimi, Ollama, ...): base URL filled in, the key to the keychain, a
 *  model map from the Claude families Claude Code asks for to the provider's models. */
function PresetProvider({ app, act }: { app: AppState; act: Act }) {
  const presets = app.presets ?? [];
  const [id, setId] = useState(presets[0]?.id ?? '');
  const [key, setKey] = useState('');
  const [edits, setEdits] = useState<Record<string, string>>({});
  const preset = presets.find((p) => p.id === id);
  if (!preset) return null;
  const locked = app.locks.local_providers || !app.keychain.available;
  const value = (name: string, fallback: string) => edits[name] ?? fallback;
  const edit = (name: string, v: string) => setEdits({ ...edits, [name]: v });
  const add = async (e: Event) => {
    e.preventDefault();
    const models: Record<string, string> = {};
    for (const [family, model] of Object.entries(preset.models)) {
      models[family] = value(`model:${family}`, model).trim();
    }
    const body: Record<string, unknown> = {
      kind: 'preset',
      preset: preset.id,
      base_url: value('base_url', preset.base_url).trim(),
      models,
    };
    if (key.trim() !== '') body.api_key = key.trim();
    // The key is sent once and forgotten here, whatever the answer.
    setKey('');
    await act('POST', 'providers', body);
  };
  return (
    <form class="stack" data-testid="preset-provider" onSubmit={(e) => void add(e)}>
      <label>
        Provider preset
        <select
          value={id}
          disabled={locked}
          data-testid="preset-kind"
          onChange={(e) => {
            setId(e.currentTarget.value);
            setEdits({});
            setKey('');
          }}
        >
          {presets.map((p) => (
            <option value={p.id} key={p.id}>
              {p.label}
            </option>
          ))}
        </select>
      </label>
      <label>
        Base URL{preset.wire === 'openai' ? ' (OpenAI-compatible, with its version path)' : ''}
        <input
          type="text"
          autocomplete="off"
          spellcheck={false}
          disabled={locked}
          data-testid="preset-base_url"
          value={value('base_url', preset.base_url)}
          onInput={(e) => edit('base_url', e.currentTarget.value)}
        />
      </label>
      {preset.key !== 'none' && (
        <label>
          API key{preset.key === 'optional' ? ' (optional)' : ''}
          <input
            type="password"
            autocomplete="off"
            spellcheck={false}
            disabled={locked}
            data-testid="preset-api_key"
            value={key}
            onInput={(e) => setKey(e.currentTarget.value)}
          />
        </label>
      )}
      {Object.entries(preset.models).map(([family, model]) => (
        <label key={`${preset.id}-${family}`}>
          {family === '*' ? 'Model for every Claude model' : `Model for Claude ${family}`}
          <input
            type="text"
            autocomplete="off"
            spellcheck={false}
            disabled={locked}
            data-testid={`preset-model-${family === '*' ? 'any' : family}`}
            value={value(`model:${family}`, model)}
            onInput={(e) => edit(`model:${family}`, e.currentTarget.value)}
          />
        </label>
      ))}
      <div class="row">
        <button type="submit" disabled={locked} data-testid="preset-add">
          Add {preset.label}
        </button>
      </div>
    </form>
  );
}

type CloudKind = 'bedrock' | 'vertex' | 'foundry';

type Field = { name: string; label: string; secret?: boolean; multiline?: boolean; flag?: boolean };

/** The form fields each cloud provider takes; `secret` ones are sent once and forgotten. */
const CLOUD_FIELDS: Record<CloudKind, Field[]> = {
  bedrock: [
    { name: 'region', label: 'AWS region' },
    { name: 'aws_access_key_id', label: 'Access key id' },
    { name: 'aws_secret_access_key', label: 'Secret access key', secret: true },
    { name: 'aws_bearer_token', label: 'or a Bedrock API key', secret: true },
    { name: 'aws_profile', label: 'or an AWS profile' },
    { name: 'base_url', label: 'Endpoint URL (optional: a VPC endpoint or proxy)' },
  ],
  vertex: [
    { name: 'region', label: 'Region' },
    { name: 'project_id', label: 'Project' },
    { name: 'service_account_json', label: 'Service-account key (JSON)', secret: true, multiline: true },
    { name: 'access_token', label: 'or an access token', secret: true },
    { name: 'base_url', label: 'Endpoint URL (optional)' },
  ],
  foundry: [
    { name: 'resource', label: 'Azure resource' },
    { name: 'api_key', label: 'API key', secret: true },
    {
      name: 'use_azure_ad',
      label: 'or sign in with Microsoft Entra ID (no key stored: the Azure credential of this computer\'s environment)',
      flag: true,
    },
    { name: 'base_url', label: 'Endpoint URL (optional)' },
  ],
};

/** Bedrock, Vertex or Foundry: the secrets go to the keychain, the gateway restarts. */
function CloudProvider({ app, act }: { app: AppState; act: Act }) {
  const [kind, setKind] = useState<CloudKind>('bedrock');
  const [values, setValues] = useState<Record<string, string>>({});
  const locked = app.locks.local_providers || !app.keychain.available;
  const set = (name: string, v: string) => setValues({ ...values, [name]: v });
  const add = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, string | boolean> = { kind };
    for (const f of CLOUD_FIELDS[kind]) {
      const v = (values[f.name] ?? '').trim();
      if (f.flag) {
        if (v === 'true') body[f.name] = true;
      } else if (v !== '') body[f.name] = v;
    }
    // Secrets are not kept in the page, whatever the answer.
    setValues({});
    await act('POST', 'providers', body);
  };
  return (
    <form class="stack" data-testid="cloud-provider" onSubmit={(e) => void add(e)}>
      <label>
        Cloud provider
        <select
          value={kind}
          disabled={locked}
          data-testid="cloud-kind"
          onChange={(e) => {
            setKind(e.currentTarget.value as CloudKind);
            setValues({});
          }}
        >
          <option value="bedrock">Amazon Bedrock</option>
          <option value="vertex">Google Vertex AI</option>
          <option value="foundry">Microsoft Foundry</option>
        </select>
      </label>
      {CLOUD_FIELDS[kind].map((f) => (
        <label key={`${kind}-${f.name}`}>
          {f.label}
          {f.flag ? (
            <input
              type="checkbox"
              disabled={locked}
              data-testid={`cloud-${f.name}`}
              checked={values[f.name] === 'true'}
              onChange={(e) => set(f.name, e.currentTarget.checked ? 'true' : '')}
            />
          ) : f.multiline ? (
            <textarea
              rows={3}
              spellcheck={false}
              disabled={locked}
              data-testid={`cloud-${f.name}`}
              value={values[f.name] ?? ''}
              onInput={(e) => set(f.name, e.currentTarget.value)}
            />
          ) : f.secret ? (
            <input
              type="password"
              autocomplete="off"
              spellcheck={false}
              disabled={locked}
              data-testid={`cloud-${f.name}`}
              value={values[f.name] ?? ''}
              onInput={(e) => set(f.name, e.currentTarget.value)}
            />
          ) : (
            <input
              type="text"
              autocomplete="off"
              spellcheck={false}
              disabled={locked}
              data-testid={`cloud-${f.name}`}
              value={values[f.name] ?? ''}
              onInput={(e) => set(f.name, e.currentTarget.value)}
            />
          )}
        </label>
      ))}
      <div class="row">
        <button type="submit" disabled={locked} data-testid="cloud-add">
          Add provider
        </button>
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
