// The Gatehouse team console (`/console` on the central server): who spends what, the
// caps and shared budgets, the audit trail, usage analytics, routing and the managed
// policies. A client of the admin API in docs/console-api.md and nothing else.
//
// Hash routing: #overview, #people, #people/<id>, #budgets, #limits, #audit, #analytics,
// #routing, #policies. Signing in is the server's (`/console/login`, the company IdP);
// this page only asks `GET /v1/organizations/me` who it is and shows the sign-in card on
// a 401.

import '../locale';
import { render } from 'preact';
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';

import { ApiError, type Me, ORG, call, errorText, onUnauthorized, setCsrf } from './api';
import { Ctx, type ConsoleCtx, type NoticeKind } from './hooks';
import { AnalyticsPage } from './pages/analytics';
import { AuditPage } from './pages/audit';
import { BudgetsPage } from './pages/budgets';
import { LimitsPage } from './pages/limits';
import { OverviewPage } from './pages/overview';
import { PeoplePage } from './pages/people';
import { PersonPage } from './pages/person';
import { PoliciesPage } from './pages/policies';
import { RoutingPage } from './pages/routing';
import { ReadOnlyBadge } from './ui';
import { localTime, shortTime } from '../format';
import '../style.css';
import './console.css';

const PAGES = [
  { id: 'overview', label: 'Overview' },
  { id: 'people', label: 'People' },
  { id: 'budgets', label: 'Groups & budgets' },
  { id: 'limits', label: 'Spend limits' },
  { id: 'audit', label: 'Audit' },
  { id: 'analytics', label: 'Usage analytics' },
  { id: 'routing', label: 'Routing' },
  { id: 'policies', label: 'Policies' },
] as const;
type PageId = (typeof PAGES)[number]['id'];

type Route = { page: PageId; arg: string | null };

function parseHash(): Route {
  const h = window.location.hash.replace(/^#\/?/, '');
  const slash = h.indexOf('/');
  const head = slash < 0 ? h : h.slice(0, slash);
  const rest = slash < 0 ? null : h.slice(slash + 1);
  const page = PAGES.find((p) => p.id === head)?.id ?? 'overview';
  let arg: string | null = null;
  if (rest) {
    try {
      arg = decodeURIComponent(rest);
    } catch {
      arg = rest;
    }
  }
  return { page, arg: page === 'people' ? arg : null };
}

function useRoute(): Route {
  const [route, setRoute] = useState<Route>(parseHash);
  useEffect(() => {
    const on = () => {
      setRoute(parseHash());
      window.scrollTo(0, 0);
    };
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

type Auth = { state: 'loading' } | { state: 'signed_out'; why?: string } | { state: 'error'; error: string } | { state: 'in'; me: Me };

function SignIn({ why }: { why?: string }) {
  return (
    <div class="gh-center">
      <div class="card signin-card" id="signin" data-testid="signin">
        <div class="brand">
          <img src="/favicon.svg" alt="" width={28} height={28} />
          <span>Gatehouse console</span>
        </div>
        {why && (
          <p class="banner info" role="status">
            {why}
          </p>
        )}
        <p>
          The team console shows who spends what through the gateway and lets administrators set spend limits and
          shared budgets.
        </p>
        <p class="muted">
          It is for members of the gateway's <strong class="fg">admin</strong> groups (who may change things) and{' '}
          <strong class="fg">viewer</strong> groups (who read everything and change nothing). Anyone else is turned
          away after signing in; ask your gateway administrator to add you to one of those groups.
        </p>
        <a class="button-link" href="/console/login" id="signin-link" data-testid="signin-link">
          Sign in with your company account
        </a>
      </div>
    </div>
  );
}

function App() {
  const [auth, setAuth] = useState<Auth>({ state: 'loading' });
  const [notice, setNotice] = useState<{ kind: NoticeKind; text: string; seq: number } | null>(null);
  const route = useRoute();

  const whoAmI = useCallback(async () => {
    try {
      const me = await call<Me>('GET', `${ORG}/me`, undefined, true);
      setCsrf(me.csrf_token);
      setAuth({ state: 'in', me });
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) {
        setCsrf(null);
        setAuth({ state: 'signed_out' });
      } else if (e instanceof ApiError && e.status === 403) {
        setAuth({ state: 'error', error: `${e.message} — you are signed in, but not allowed to use the console.` });
      } else setAuth({ state: 'error', error: errorText(e) });
    }
  }, []);

  useEffect(() => {
    onUnauthorized(() => {
      setCsrf(null);
      setAuth({ state: 'signed_out', why: 'Your console session ended. Sign in again to go on.' });
    });
    void whoAmI();
  }, [whoAmI]);

  useEffect(() => {
    document.title = 'Gatehouse console';
  }, []);

  const notify = useCallback((kind: NoticeKind, text: string) => {
    setNotice((n) => ({ kind, text, seq: (n?.seq ?? 0) + 1 }));
  }, []);

  // A success line fades after a while; an error stays until dismissed or replaced.
  useEffect(() => {
    if (!notice || notice.kind !== 'ok') return undefined;
    const t = window.setTimeout(() => setNotice((n) => (n && n.seq === notice.seq ? null : n)), 15_000);
    return () => window.clearTimeout(t);
  }, [notice]);

  // Leaving a page clears its notice.
  useEffect(() => setNotice(null), [route.page, route.arg]);

  const signOut = useCallback(async () => {
    try {
      await call('POST', '/console/logout', undefined, true);
    } catch (e) {
      // Already signed out (401) is what was asked for; anything else is said.
      if (!(e instanceof ApiError && e.status === 401)) {
        notify('error', `Could not sign out: ${errorText(e)}`);
        return;
      }
    }
    setCsrf(null);
    setAuth({ state: 'signed_out', why: 'You are signed out.' });
  }, [notify]);

  const ctx: ConsoleCtx | null = useMemo(
    () => (auth.state === 'in' ? { me: auth.me, canEdit: auth.me.role === 'admin', notify } : null),
    [auth, notify],
  );

  if (auth.state === 'loading') return <p class="loading gh-center">Loading the Gatehouse console…</p>;
  if (auth.state === 'signed_out') return <SignIn why={auth.why} />;
  if (auth.state === 'error' || !ctx)
    return (
      <div class="gh-center">
        <div class="card signin-card" data-testid="me-error">
          <h2>The console could not start</h2>
          <p class="banner error" role="alert">
            {auth.state === 'error' ? auth.error : 'unknown state'}
          </p>
          <div class="row">
            <button type="button" onClick={() => void whoAmI()}>
              Try again
            </button>
            <a href="/console/login">Sign in again</a>
          </div>
        </div>
      </div>
    );

  const me = ctx.me;
  const who = me.user ? me.user.name || me.user.email || me.user.id : me.actor;
  return (
    <Ctx.Provider value={ctx}>
      <div class="gh-layout">
        <aside class="gh-side">
          <div class="gh-side-inner">
          <div class="brand">
            <img src="/favicon.svg" alt="" width={24} height={24} />
            <span>Gatehouse</span>
          </div>
          <nav aria-label="Console pages">
            <ul class="gh-nav">
              {PAGES.map((p) => (
                <li key={p.id}>
                  <a
                    href={`#${p.id}`}
                    data-nav={p.id}
                    class={route.page === p.id ? 'active' : undefined}
                    aria-current={route.page === p.id ? 'page' : undefined}
                  >
                    {p.label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          <div class="gh-who">
            <span class="clip strong" title={who}>
              {who}
            </span>
            {me.user?.email && me.user.email !== who && (
              <span class="clip muted small" title={me.user.email}>
                {me.user.email}
              </span>
            )}
            <span class="row center gh-role-row">
              <span id="role" class={`badge ${me.role === 'admin' ? 'ok' : 'idle'}`} data-role={me.role}>
                {me.role}
              </span>
              {me.role !== 'admin' && <ReadOnlyBadge />}
            </span>
            {me.expires_at && (
              <span class="muted small" title={localTime(me.expires_at)}>
                Session until {shortTime(me.expires_at)}
              </span>
            )}
            {me.via === 'console' ? (
              <button type="button" id="signout" class="secondary compact" onClick={() => void signOut()}>
                Sign out
              </button>
            ) : (
              <span class="muted small">Signed in with {me.via === 'admin_key' ? 'an admin key' : 'a Gatehouse session'}</span>
            )}
          </div>
          </div>
        </aside>
        <main class="gh-main">
          {notice && (
            <p id="notice" class={`banner with-action ${notice.kind}`} role={notice.kind === 'error' ? 'alert' : 'status'} data-kind={notice.kind}>
              <span class="banner-text">{notice.text}</span>
              <button type="button" class="link" onClick={() => setNotice(null)} aria-label="Dismiss">
                ×
              </button>
            </p>
          )}
          {route.page === 'overview' && <OverviewPage />}
          {route.page === 'people' && (route.arg ? <PersonPage id={route.arg} key={route.arg} /> : <PeoplePage />)}
          {route.page === 'budgets' && <BudgetsPage />}
          {route.page === 'limits' && <LimitsPage />}
          {route.page === 'audit' && <AuditPage />}
          {route.page === 'analytics' && <AnalyticsPage />}
          {route.page === 'routing' && <RoutingPage />}
          {route.page === 'policies' && <PoliciesPage />}
        </main>
      </div>
    </Ctx.Provider>
  );
}

const root = document.getElementById('app');
document.body.classList.add('gh-console');
if (root) {
  root.textContent = '';
  render(<App />, root);
}
