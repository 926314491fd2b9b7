// The Gatehouse dashboard: one page with tabs. It reads the engine's dashboard snapshot
// (every mode) and, inside the desktop app, the app state; it re-reads both when the
// engine's event stream says something changed, and every 10 s as a fallback. The
// desktop-only views (Get started, Projects, Sessions, the charts) read the app API
// themselves and re-read it on the same beat (`tick`).

// First: mends a language tag `Intl` would refuse before any library reads it.
import './locale';
import { render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

import {
  type Act,
  ApiFailure,
  type AppState,
  type Dashboard,
  appCall,
  fetchAppState,
  fetchDashboard,
  takeAppToken,
} from './api';
import { BlocksView } from './views/blocks';
import { DashboardView } from './views/dashboard';
import { LoginView } from './views/login';
import { ProjectsView } from './views/projects';
import { SessionsView } from './views/sessions';
import { SettingsView } from './views/settings';
import { SetupView } from './views/setup';
import { UpstreamsView } from './views/upstreams';
import './style.css';

const TABS = [
  { id: 'setup', label: 'Get started', app: true },
  { id: 'dashboard', label: 'Dashboard', app: false },
  { id: 'projects', label: 'Projects', app: true },
  { id: 'sessions', label: 'Sessions', app: true },
  { id: 'blocks', label: 'Policy blocks', app: false },
  { id: 'login', label: 'Login', app: true },
  { id: 'upstreams', label: 'Upstreams', app: false },
  { id: 'settings', label: 'Settings', app: true },
] as const;
type Tab = (typeof TABS)[number]['id'];

const POLL_MS = 10_000;
const DEBOUNCE_MS = 250;

/** The tab the address names (`#sessions`), if any. */
function hashTab(): Tab | undefined {
  const h = window.location.hash.replace(/^#/, '');
  return TABS.find((t) => t.id === h)?.id as Tab | undefined;
}

function initialTab(): Tab {
  return hashTab() ?? 'dashboard';
}

/** The IT bootstrap put this desktop in connected mode: its sign-in comes first. */
function forcedConnected(app: AppState): boolean {
  return app.bootstrap.present && app.locks.mode && app.mode === 'connected';
}

function App() {
  const token = useRef<string | null>(takeAppToken());
  const [tab, setTab] = useState<Tab>(initialTab);
  const [dash, setDash] = useState<Dashboard | null>(null);
  const [dashError, setDashError] = useState<string | null>(null);
  const [app, setApp] = useState<AppState | null>(null);
  const [appError, setAppError] = useState<string | null>(null);
  const [notice, setNotice] = useState<{ kind: 'error' | 'ok'; text: string } | null>(null);
  const [live, setLive] = useState(false);
  const [tick, setTick] = useState(0);
  const loginShown = useRef(false);
  const setupChecked = useRef(false);
  // A tab the address named (a reload on `#sessions`) is kept, not replaced by Get started.
  const named = useRef(hashTab() !== undefined);

  const refresh = useCallback(async () => {
    const [d, a] = await Promise.allSettled([fetchDashboard(), fetchAppState(token.current)]);
    if (d.status === 'fulfilled') {
      setDash(d.value);
      setDashError(null);
    } else {
      setDashError(d.reason instanceof Error ? d.reason.message : 'the gateway did not answer');
    }
    if (a.status === 'fulfilled') {
      // A sign-in waiting for the person (a fresh install with an IT bootstrap goes
      // straight there): show the Login tab once.
      if (a.value && a.value.login.state === 'pending' && !loginShown.current) {
        loginShown.current = true;
        setupChecked.current = true;
        setTab('login');
      }
      // Nothing set up yet (no provider, not connected): Get started comes first, once.
      if (a.value && !setupChecked.current) {
        setupChecked.current = true;
        if (a.value.setup?.needed && !forcedConnected(a.value) && !named.current) setTab('setup');
      }
      setApp(a.value);
      setAppError(null);
    } else {
      setApp(null);
      setAppError(a.reason instanceof Error ? a.reason.message : 'the app did not answer');
    }
    setTick((t) => t + 1);
  }, []);

  useEffect(() => {
    void refresh();
    let timer: number | undefined;
    const soon = () => {
      window.clearTimeout(timer);
      timer = window.setTimeout(() => void refresh(), DEBOUNCE_MS);
    };
    const events = new EventSource('/gatehouse/api/events');
    events.addEventListener('dashboard', soon);
    events.onopen = () => setLive(true);
    events.onerror = () => setLive(false);
    const poll = window.setInterval(() => void refresh(), POLL_MS);
    return () => {
      events.close();
      window.clearInterval(poll);
      window.clearTimeout(timer);
    };
  }, [refresh]);

  const act: Act = useCallback(async (method, path, body) => {
    if (!token.current) return false;
    try {
      setApp(await appCall(token.current, method, path, body));
      setNotice(null);
      return true;
    } catch (e) {
      const text = e instanceof ApiFailure ? e.message : 'the app did not answer';
      setNotice({ kind: 'error', text });
      return false;
    }
  }, []);

  const readOnly = app === null;
  const tabs = TABS.filter((t) => !t.app || !readOnly);
  const shown: Tab = tabs.some((t) => t.id === tab) ? tab : 'dashboard';
  const choose = useCallback((t: Tab) => {
    setTab(t);
    history.replaceState(null, '', `#${t}`);
  }, []);
  const paused = app?.paused ?? dash?.server.paused ?? false;

  return (
    <div class="shell">
      <header class="top">
        <div class="brand">
          <img src="/favicon.svg" alt="" width={28} height={28} />
          <span>Gatehouse</span>
          {readOnly ? (
            <span class="chip" data-testid="read-only">read-only status page</span>
          ) : (
            <span class="chip" data-testid="app-mode">{app.mode}</span>
          )}
          {paused && <span class="chip warn" data-testid="paused">paused</span>}
        </div>
        <div class="meta">
          <span class={live ? 'dot on' : 'dot'} title={live ? 'live updates on' : 'polling every 10 s'} />
          {dash && (
            <span>
              v{dash.server.version} · {dash.server.store}
              {dash.server.ready ? '' : ' (unavailable)'}
            </span>
          )}
          {app && (
            <button
              type="button"
              class="secondary"
              data-testid="pause-toggle"
              onClick={() => void act('POST', 'pause', { paused: !app.paused })}
            >
              {app.paused ? 'Resume gateway' : 'Pause gateway'}
            </button>
          )}
        </div>
      </header>
      <nav class="tabs" role="tablist" aria-label="Sections">
        {tabs.map((t) => (
          <button
            type="button"
            role="tab"
            id={`tab-${t.id}`}
            aria-selected={shown === t.id}
            aria-controls="panel"
            data-testid={`tab-${t.id}`}
            class={shown === t.id ? 'tab active' : 'tab'}
            onClick={() => choose(t.id)}
          >
            {t.label}
            {t.id === 'blocks' && (dash?.blocks?.length ?? 0) > 0 && (
              <span class="count">{dash?.blocks?.length}</span>
            )}
          </button>
        ))}
      </nav>
      {app && !app.keychain.available && (
        <p class="banner error" role="alert" data-testid="keychain-banner">
          No keychain is available, so Gatehouse will not store secrets
          {app.keychain.error ? `: ${app.keychain.error}` : '.'}
        </p>
      )}
      {app?.bootstrap.error && (
        <p class="banner error" role="alert">
          The IT bootstrap file {app.bootstrap.path} could not be used: {app.bootstrap.error}
        </p>
      )}
      {appError && token.current && (
        <p class="banner warn" role="status">The desktop app did not answer ({appError}); showing the read-only view.</p>
      )}
      {dashError && (
        <p class="banner error" role="alert">Could not read the dashboard: {dashError}</p>
      )}
      {notice && (
        <p class={`banner with-action ${notice.kind}`} role="alert" data-testid="notice">
          <span class="banner-text">{notice.text}</span>
          <button type="button" class="link" onClick={() => setNotice(null)} aria-label="Dismiss">×</button>
        </p>
      )}
      <main>
        <div id="panel" role="tabpanel" aria-labelledby={`tab-${shown}`}>
        {dash === null && !dashError && (shown === 'dashboard' || shown === 'blocks' || shown === 'upstreams') && (
          <p class="muted">Loading…</p>
        )}
        {dash && shown === 'dashboard' && (
          <DashboardView
            dash={dash}
            app={app}
            desktop={app && token.current ? { token: token.current, tick, go: choose } : undefined}
          />
        )}
        {dash && shown === 'blocks' && <BlocksView dash={dash} />}
        {dash && shown === 'upstreams' && <UpstreamsView dash={dash} app={app} />}
        {app && shown === 'login' && <LoginView app={app} act={act} />}
        {app && shown === 'settings' && <SettingsView app={app} act={act} />}
        {app && token.current && shown === 'setup' && (
          <SetupView app={app} act={act} token={token.current} go={choose} />
        )}
        {app && token.current && shown === 'projects' && (
          <ProjectsView token={token.current} tick={tick} go={choose} />
        )}
        {app && token.current && shown === 'sessions' && (
          <SessionsView token={token.current} tick={tick} go={choose} />
        )}
        </div>
      </main>
    </div>
  );
}

const root = document.getElementById('app');
if (root) {
  root.textContent = '';
  render(<App />, root);
}
