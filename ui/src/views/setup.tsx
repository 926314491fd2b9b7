// Get started (desktop only): three steps from a fresh install to Claude Code going
// through Gatehouse, each with its live state from the app state main.tsx polls:
//   1. where the models come from (the organisation's Gatehouse, or a provider of one's own),
//   2. point Claude Code here (showing what will change in its settings first),
//   3. try it (done when the first request from Claude Code arrives).

import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

import type { Act, AppState, ClaudeCodePreview, FirstRequest, SetupState } from '../api';
import { localTime, money, relative } from '../format';
import { useAppGet } from '../hooks';
import { type Go, TabLink } from './common';
import { DeviceCode, STATE_LABEL } from './login';
import { CLOUD_LABEL, Lock, ProviderList, ProviderPicker, TestResult } from './providers';

type StepState = 'done' | 'current' | 'todo';

const STEP_LABEL: Record<StepState, string> = { done: 'Done', current: 'Next', todo: 'To do' };
const STEP_BADGE: Record<StepState, string> = { done: 'badge ok', current: 'badge warn', todo: 'badge idle' };

/** The checklist, worked out from the rest of the state when the app is older than it. */
export function setupOf(app: AppState): SetupState {
  if (app.setup) return app.setup;
  const signedIn = app.mode === 'connected' && app.login.state === 'signed_in';
  const providerReady = signedIn || (app.mode === 'standalone' && app.providers.length > 0);
  return {
    needed: app.mode === 'standalone' && app.providers.length === 0,
    provider_ready: providerReady,
    claude_code_configured: app.claude_code.status === 'configured',
    first_request: null,
  };
}

function Step({
  n,
  title,
  state,
  summary,
  after,
  children,
}: {
  n: number;
  title: string;
  state: StepState;
  /** Shown above the step's body, open or not. */
  summary?: ComponentChildren;
  /** Shown below the step's body, open or not. */
  after?: ComponentChildren;
  children: ComponentChildren;
}) {
  // null: open while this is the step to do now; a click overrides that.
  const [open, setOpen] = useState<boolean | null>(null);
  const expanded = open ?? state === 'current';
  return (
    <li class={`step card ${state}`} data-testid={`setup-step-${n}`} data-state={state}>
      <div class="step-head">
        <span class="step-mark" aria-hidden="true">
          {state === 'done' ? '✓' : n}
        </span>
        <h3 id={`h-step-${n}`}>
          <span class="visually-hidden">Step {n}: </span>
          {title}
        </h3>
        <span class={STEP_BADGE[state]} data-testid={`setup-step-${n}-state`}>
          {STEP_LABEL[state]}
        </span>
        <button
          type="button"
          class="secondary compact"
          aria-expanded={expanded}
          aria-controls={`step-${n}-body`}
          data-testid={`setup-step-${n}-toggle`}
          onClick={() => setOpen(!expanded)}
        >
          {expanded ? 'Hide' : state === 'done' ? 'Change' : 'Show'}
        </button>
      </div>
      {summary && <div class="step-summary">{summary}</div>}
      <div id={`step-${n}-body`} class="stack step-body" hidden={!expanded}>
        {expanded && children}
      </div>
      {after && <div class="step-summary">{after}</div>}
    </li>
  );
}

// ---- Step 1: where the models come from ----

function SignIn({ app, act }: { app: AppState; act: Act }) {
  const l = app.login;
  const central = app.central.url ?? app.bootstrap.central_url;
  return (
    <div class="stack">
      <p data-testid="setup-login-state" data-state={l.state}>
        {STATE_LABEL[l.state]}
        {l.state === 'signed_in' && (l.email || l.name) ? ` as ${l.email ?? l.name}` : ''}
      </p>
      {l.error && (
        <p class="error-text" role="alert">
          {l.error}
        </p>
      )}
      {l.state === 'pending' && l.user_code && <DeviceCode login={l} act={act} prefix="setup-" />}
      <div class="row">
        {l.state === 'pending' ? (
          <button type="button" class="secondary" data-testid="setup-login-cancel" onClick={() => void act('POST', 'logout')}>
            Cancel
          </button>
        ) : l.state !== 'signed_in' ? (
          <button type="button" data-testid="setup-login" disabled={!central} onClick={() => void act('POST', 'login')}>
            Sign in
          </button>
        ) : null}
      </div>
    </div>
  );
}

function OrgSource({ app, act }: { app: AppState; act: Act }) {
  const central = app.central.url ?? app.bootstrap.central_url ?? '';
  const [url, setUrl] = useState(central);
  useEffect(() => setUrl(central), [central]);
  const connected = app.mode === 'connected';
  const changed = url.trim() !== central;
  const connect = (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = {};
    if (!app.locks.mode) body.mode = 'connected';
    if (!app.locks.central_url) body.central_url = url.trim() === '' ? null : url.trim();
    void act('POST', 'settings', body);
  };
  return (
    <div class="stack">
      <form class="row" onSubmit={connect}>
        <label class="grow">
          <span class="label-row">
            Your organisation's Gatehouse <Lock on={app.locks.central_url} />
          </span>
          <input
            type="url"
            required
            value={url}
            disabled={app.locks.central_url}
            placeholder="https://gatehouse.example.com"
            data-testid="setup-central-url"
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        </label>
        <button
          type="submit"
          data-testid="setup-connect"
          disabled={url.trim() === '' || (connected && !changed) || (app.locks.mode && !connected)}
        >
          {connected ? 'Change server' : 'Connect'}
        </button>
      </form>
      {connected ? (
        <SignIn app={app} act={act} />
      ) : (
        <p class="muted small">Then sign in with your work account: your organisation's rules and budgets apply.</p>
      )}
    </div>
  );
}

function OwnSource({ app, act }: { app: AppState; act: Act }) {
  if (app.mode === 'connected') {
    return (
      <div class="stack">
        <p>Gatehouse goes through your organisation's server now.</p>
        <div class="row">
          <button
            type="button"
            data-testid="setup-use-own"
            disabled={app.locks.mode}
            onClick={() => void act('POST', 'settings', { mode: 'standalone' })}
          >
            Use my own provider instead
          </button>
        </div>
      </div>
    );
  }
  return (
    <div class="stack">
      {app.locks.local_providers && (
        <p class="muted small">
          <Lock on /> Your IT department manages the providers.
        </p>
      )}
      <ProviderPicker app={app} act={act} />
      {app.providers.length > 0 && (
        <div class="stack">
          <h4>Your providers</h4>
          <p class="muted small">Test sends a tiny request and shows the provider's answer.</p>
          <ProviderList app={app} act={act} />
        </div>
      )}
    </div>
  );
}

/** What step 1 settled on, with a Test of the provider (standalone). */
function SourceSummary({ app, act }: { app: AppState; act: Act }) {
  if (app.mode === 'connected') {
    const l = app.login;
    return (
      <p data-testid="setup-source-summary">
        Through <span class="mono">{app.central.url ?? app.bootstrap.central_url ?? 'your organisation'}</span>
        {l.state === 'signed_in' && (l.email || l.name) ? `, signed in as ${l.email ?? l.name}` : ''}.
      </p>
    );
  }
  const p = app.providers.find((x) => x.name === app.primary) ?? app.providers[0];
  if (!p) return null;
  return (
    <div class="row center" data-testid="setup-source-summary">
      <span>
        Using <strong>{p.name}</strong>{' '}
        <span class="muted">
          ({p.kind === 'anthropic'
            ? 'Anthropic API key'
            : p.kind === 'preset'
              ? ((app.presets ?? []).find((x) => x.id === p.preset)?.label ?? p.preset ?? 'preset')
              : CLOUD_LABEL[p.kind]}
          )
        </span>
        .
      </span>
      <button
        type="button"
        class="secondary compact"
        data-testid="setup-test-provider"
        onClick={() => void act('POST', `providers/${encodeURIComponent(p.name)}/test`, {})}
      >
        Test
      </button>
      {p.last_test && <TestResult t={p.last_test} testid="setup-test-result" />}
    </div>
  );
}

function SourceStep({ app, act }: { app: AppState; act: Act }) {
  const [source, setSource] = useState<'org' | 'own'>(app.mode === 'connected' ? 'org' : 'own');
  // The IT department chose the mode: follow it.
  useEffect(() => {
    if (app.locks.mode) setSource(app.mode === 'connected' ? 'org' : 'own');
  }, [app.locks.mode, app.mode]);
  return (
    <>
      <fieldset disabled={app.locks.mode} data-testid="setup-source">
        <legend>
          Choose one <Lock on={app.locks.mode} />
        </legend>
        <label class="radio">
          <input
            type="radio"
            name="setup-source"
            checked={source === 'org'}
            data-testid="setup-source-org"
            onChange={() => setSource('org')}
          />
          <span>
            My organisation's Gatehouse
            <span class="muted small"> — sign in with your work account</span>
          </span>
        </label>
        <label class="radio">
          <input
            type="radio"
            name="setup-source"
            checked={source === 'own'}
            data-testid="setup-source-own"
            onChange={() => setSource('own')}
          />
          <span>
            My own provider
            <span class="muted small"> — an Anthropic key, another provider, or your cloud account</span>
          </span>
        </label>
      </fieldset>
      {source === 'org' ? <OrgSource app={app} act={act} /> : <OwnSource app={app} act={act} />}
    </>
  );
}

// ---- Step 2: point Claude Code here ----

function ClaudeCodeStep({ app, act, token }: { app: AppState; act: Act; token: string }) {
  const cc = app.claude_code;
  const locked = app.locks.claude_code;
  const [statusline, setStatusline] = useState(cc.statusline === 'gatehouse');
  const preview = useAppGet<ClaudeCodePreview>(token, 'claude-code/preview', `${cc.status}|${cc.statusline}|${app.listen}`);
  const changes = preview.data?.changes ?? [];
  const statuslineListed = changes.some((c) => c.key.toLowerCase().startsWith('statusline'));
  const configure = async () => {
    const body: Record<string, unknown> = { action: 'configure' };
    if (statusline) body.statusline = true;
    if (await act('POST', 'claude-code', body)) preview.reload();
  };
  const undo = async () => {
    if (await act('POST', 'claude-code', { action: 'undo' })) preview.reload();
  };
  return (
    <>
      <p>
        Gatehouse writes these settings into{' '}
        <span class="mono">{preview.data?.settings_path ?? cc.settings_path}</span>, so that Claude Code sends
        its requests here. <Lock on={locked} />
      </p>
      {cc.detail && <p class="muted small">{cc.detail}</p>}
      {preview.error && (
        <p class="error-text" role="alert" data-testid="claude-code-preview-error">
          Could not read what would change: {preview.error.message}
        </p>
      )}
      {preview.loading && <p class="muted">Reading Claude Code's settings…</p>}
      {preview.data &&
        (changes.length === 0 && !statusline ? (
          <p class="muted" data-testid="claude-code-preview" data-count={0}>
            Nothing to change: Claude Code already points here.
          </p>
        ) : (
          <ul class="changes" data-testid="claude-code-preview" data-count={changes.length}>
            {changes.map((c) => (
              <li data-testid="claude-code-change" data-key={c.key} key={c.key}>
                <span class="mono change-key">{c.key}</span>{' '}
                <span class={c.from === null ? 'change-from unset' : 'change-from'} data-testid="claude-code-change-from">
                  {c.from ?? 'not set'}
                </span>{' '}
                <span aria-label="becomes">→</span>{' '}
                <span class="change-to" data-testid="claude-code-change-to">
                  {c.to ?? 'removed'}
                </span>
              </li>
            ))}
            {statusline && !statuslineListed && (
              <li data-testid="claude-code-change-statusline" data-key="statusLine">
                <span class="mono change-key">statusLine</span>{' '}
                <span class={cc.statusline === 'other' ? 'change-from' : 'change-from unset'}>
                  {cc.statusline === 'other' ? 'your own status line' : 'not set'}
                </span>{' '}
                <span aria-label="becomes">→</span> <span class="change-to">Gatehouse's cost</span>
              </li>
            )}
          </ul>
        ))}
      <label class="radio">
        <input
          type="checkbox"
          checked={statusline}
          disabled={locked}
          data-testid="setup-statusline"
          onChange={(e) => setStatusline(e.currentTarget.checked)}
        />
        Also show Gatehouse's cost in Claude Code's status line
      </label>
      {cc.statusline === 'other' && (
        <p class="muted small" data-testid="statusline-other">
          You have a status line of your own: it is kept unless you tick this.
        </p>
      )}
      <div class="row">
        <button type="button" disabled={locked} data-testid="setup-claude-code-configure" onClick={() => void configure()}>
          {cc.status === 'not_configured' ? 'Configure Claude Code' : 'Configure again'}
        </button>
        <button
          type="button"
          class="secondary"
          disabled={locked || cc.status === 'not_configured'}
          data-testid="setup-claude-code-undo"
          onClick={() => void undo()}
        >
          Undo
        </button>
      </div>
    </>
  );
}

// ---- Step 3: try it ----

const COMMAND = 'claude -p "Say hello"';

function CopyCommand() {
  const code = useRef<HTMLElement>(null);
  const [said, setSaid] = useState<string | null>(null);
  const selectIt = () => {
    const el = code.current;
    const sel = window.getSelection();
    if (!el || !sel) return;
    const range = document.createRange();
    range.selectNodeContents(el);
    sel.removeAllRanges();
    sel.addRange(range);
  };
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(COMMAND);
      setSaid('Copied.');
    } catch {
      selectIt();
      setSaid('Selected: press Ctrl+C (⌘C on a Mac) to copy.');
    }
  };
  return (
    <div class="stack">
      <div class="code-row">
        <pre class="code">
          <code ref={code} data-testid="setup-command">
            {COMMAND}
          </code>
        </pre>
        <button type="button" class="secondary compact" data-testid="setup-copy" onClick={() => void copy()}>
          Copy
        </button>
      </div>
      <p class="muted small" role="status">
        {said ?? (
          <>
            or just run <code>claude</code> in any project.
          </>
        )}
      </p>
    </div>
  );
}

function FirstRequestLine({ first }: { first: FirstRequest | null }) {
  if (!first) {
    return (
      <p class="first-request" role="status" data-testid="setup-first-request" data-state="waiting">
        <span class="spinner" aria-hidden="true" /> Waiting for the first request…
      </p>
    );
  }
  return (
    <p class="first-request ok" role="status" data-testid="setup-first-request" data-state="arrived" title={first.client}>
      <span class="tick" aria-hidden="true">
        ✓
      </span>{' '}
      First request from Claude Code arrived:{' '}
      <span class="mono" data-testid="setup-first-request-model">
        {first.model}
      </span>
      , <span data-testid="setup-first-request-cost">{money(first.cost_micro_usd)}</span>,{' '}
      <span title={localTime(first.at)} data-testid="setup-first-request-at">
        {relative(first.at)}
      </span>
    </p>
  );
}

// ---- The view ----

export function SetupView({ app, act, token, go }: { app: AppState; act: Act; token: string; go: Go }) {
  const s = setupOf(app);
  const one: StepState = s.provider_ready ? 'done' : 'current';
  const two: StepState = s.claude_code_configured ? 'done' : one === 'done' ? 'current' : 'todo';
  const three: StepState = s.first_request ? 'done' : one === 'done' && two === 'done' ? 'current' : 'todo';
  const all = one === 'done' && two === 'done' && three === 'done';
  return (
    <section class="stack" aria-labelledby="h-setup" data-testid="setup">
      <div class="view-head">
        <h2 id="h-setup">Get started</h2>
        <span class="muted small">Three steps to send Claude Code through Gatehouse and see what it costs</span>
      </div>
      {app.bootstrap.login_notice && <p class="banner info">{app.bootstrap.login_notice}</p>}
      <ol class="steps">
        <Step
          n={1}
          title="Where do your models come from?"
          state={one}
          summary={one === 'done' ? <SourceSummary app={app} act={act} /> : undefined}
        >
          <SourceStep app={app} act={act} />
        </Step>
        <Step
          n={2}
          title="Point Claude Code here"
          state={two}
          summary={
            two === 'done' ? (
              <p data-testid="setup-claude-code-summary">
                Claude Code sends its requests to Gatehouse{' '}
                <span class="muted mono small">({app.claude_code.settings_path})</span>.
              </p>
            ) : undefined
          }
        >
          <ClaudeCodeStep app={app} act={act} token={token} />
        </Step>
        <Step
          n={3}
          title="Try it"
          state={three}
          after={three === 'todo' ? undefined : <FirstRequestLine first={s.first_request} />}
        >
          <p>Run this in a terminal:</p>
          <CopyCommand />
        </Step>
      </ol>
      {all && (
        <p class="banner ok" data-testid="setup-done">
          You're set. See what Claude Code spends in{' '}
          <TabLink to="projects" go={go} testid="setup-go-projects">
            Projects
          </TabLink>{' '}
          and{' '}
          <TabLink to="sessions" go={go} testid="setup-go-sessions">
            Sessions
          </TabLink>
          .
        </p>
      )}
    </section>
  );
}
