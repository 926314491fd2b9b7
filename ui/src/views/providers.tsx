// The provider forms Settings and Get started share: the list of providers (with Test),
// an Anthropic key, a preset (DeepSeek, Kimi, Ollama, ...) and a cloud provider (Bedrock,
// Vertex, Foundry). Secrets go to the keychain and are never shown again: every form
// forgets what was typed once it has been sent, whatever the answer.

import { useState } from 'preact/hooks';

import type { Act, AppState, ProviderTest } from '../api';

export function Lock({ on }: { on: boolean }) {
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

/** The last Test's answer: `works (200): …` or `failed (401): <the exact error>`. */
export function TestResult({ t, testid }: { t: ProviderTest; testid: string }) {
  return (
    <span class={t.ok ? 'badge ok wrap' : 'badge bad wrap'} data-testid={testid} title={t.at}>
      {t.ok ? 'works' : 'failed'}
      {t.status !== null ? ` (${t.status})` : ''}: {t.message}
    </span>
  );
}

/** The providers, each with Use first, its key state, Test (and the last answer) and Remove. */
export function ProviderList({ app, act }: { app: AppState; act: Act }) {
  const locked = app.locks.local_providers;
  if (app.providers.length === 0) return <p class="muted">No provider yet.</p>;
  return (
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
          {p.last_test && <TestResult t={p.last_test} testid="test-result" />}
        </li>
      ))}
    </ul>
  );
}

/** An Anthropic API key. */
export function AnthropicKey({ app, act }: { app: AppState; act: Act }) {
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
    <form class="row" data-testid="anthropic-key-form" onSubmit={(e) => void add(e)}>
      <label class="grow">
        Anthropic API key
        <input
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={key}
          disabled={locked || !app.keychain.available}
          placeholder="sk-ant-…"
          data-testid="api-key"
          onInput={(e) => setKey(e.currentTarget.value)}
        />
      </label>
      <button type="submit" disabled={locked || !app.keychain.available || key.trim() === ''}>
        Add key
      </button>
    </form>
  );
}

/** Settings' Providers section. */
export function Providers({ app, act }: { app: AppState; act: Act }) {
  return (
    <section class="card stack" aria-labelledby="h-prov">
      <h3 id="h-prov">
        Providers <Lock on={app.locks.local_providers} />
      </h3>
      <ProviderList app={app} act={act} />
      <AnthropicKey app={app} act={act} />
      <PresetProvider app={app} act={act} />
      <CloudProvider app={app} act={act} />
    </section>
  );
}

/** A preset (DeepSeek, Kimi, Ollama, ...): base URL filled in, the key to the keychain, a
 *  model map from the Claude families Claude Code asks for to the provider's models.
 *  With `fixed`, that preset only (the caller chose it), without the preset menu. */
export function PresetProvider({ app, act, fixed }: { app: AppState; act: Act; fixed?: string }) {
  const presets = app.presets ?? [];
  const [chosen, setChosen] = useState(presets[0]?.id ?? '');
  const [key, setKey] = useState('');
  const [edits, setEdits] = useState<Record<string, string>>({});
  const id = fixed ?? chosen;
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
      {fixed === undefined && (
        <label>
          Provider preset
          <select
            value={id}
            disabled={locked}
            data-testid="preset-kind"
            onChange={(e) => {
              setChosen(e.currentTarget.value);
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
      )}
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

export type CloudKind = 'bedrock' | 'vertex' | 'foundry';

export const CLOUD_LABEL: Record<CloudKind, string> = {
  bedrock: 'Amazon Bedrock',
  vertex: 'Google Vertex AI',
  foundry: 'Microsoft Foundry',
};

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

/** Bedrock, Vertex or Foundry: the secrets go to the keychain, the gateway restarts.
 *  With `fixed`, that cloud only (the caller chose it), without the cloud menu. */
export function CloudProvider({ app, act, fixed }: { app: AppState; act: Act; fixed?: CloudKind }) {
  const [chosen, setChosen] = useState<CloudKind>('bedrock');
  const [values, setValues] = useState<Record<string, string>>({});
  const kind = fixed ?? chosen;
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
      {fixed === undefined && (
        <label>
          Cloud provider
          <select
            value={kind}
            disabled={locked}
            data-testid="cloud-kind"
            onChange={(e) => {
              setChosen(e.currentTarget.value as CloudKind);
              setValues({});
            }}
          >
            {(Object.keys(CLOUD_LABEL) as CloudKind[]).map((k) => (
              <option value={k} key={k}>
                {CLOUD_LABEL[k]}
              </option>
            ))}
          </select>
        </label>
      )}
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

/** One menu for every kind of provider (Get started): Anthropic, each preset, each cloud. */
export function ProviderPicker({ app, act }: { app: AppState; act: Act }) {
  const presets = app.presets ?? [];
  const [choice, setChoice] = useState('anthropic');
  const locked = app.locks.local_providers;
  return (
    <div class="stack provider-picker" data-testid="provider-picker">
      <label>
        Provider
        <select
          value={choice}
          disabled={locked}
          data-testid="setup-provider-kind"
          onChange={(e) => setChoice(e.currentTarget.value)}
        >
          <option value="anthropic">Anthropic (API key)</option>
          {presets.length > 0 && (
            <optgroup label="Other providers">
              {presets.map((p) => (
                <option value={`preset:${p.id}`} key={p.id}>
                  {p.label}
                </option>
              ))}
            </optgroup>
          )}
          <optgroup label="Cloud platforms">
            {(Object.keys(CLOUD_LABEL) as CloudKind[]).map((k) => (
              <option value={`cloud:${k}`} key={k}>
                {CLOUD_LABEL[k]}
              </option>
            ))}
          </optgroup>
        </select>
      </label>
      {!app.keychain.available && (
        <p class="error-text small">No keychain is available, so keys cannot be stored.</p>
      )}
      {choice === 'anthropic' ? (
        <AnthropicKey app={app} act={act} />
      ) : choice.startsWith('preset:') ? (
        <PresetProvider key={choice} app={app} act={act} fixed={choice.slice('preset:'.length)} />
      ) : (
        <CloudProvider key={choice} app={app} act={act} fixed={choice.slice('cloud:'.length) as CloudKind} />
      )}
    </div>
  );
}
