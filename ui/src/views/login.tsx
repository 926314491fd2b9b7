// Login (connected mode): who is signed in to the central Gatehouse, and the device-code
// prompt while a sign-in is pending.

import type { Act, AppState } from '../api';
import { localTime, relative } from '../format';

export const STATE_LABEL: Record<AppState['login']['state'], string> = {
  signed_out: 'Signed out',
  pending: 'Waiting for you to sign in',
  signed_in: 'Signed in',
  expired: 'Session expired: sign in again',
};

/** The device-code prompt while a sign-in waits for the person; `prefix` keeps test ids
 *  apart where the prompt is shown outside the Login tab. */
export function DeviceCode({ login: l, act, prefix = '' }: { login: AppState['login']; act: Act; prefix?: string }) {
  const url = l.verification_uri_complete ?? l.verification_uri;
  return (
    <div class="device card">
      <p>Confirm this code on the sign-in page:</p>
      <p class="user-code" data-testid={`${prefix}user-code`} aria-label="Your code">{l.user_code}</p>
      <div class="row">
        <button
          type="button"
          data-testid={`${prefix}open-verification`}
          disabled={!url}
          onClick={() => void act('POST', 'open', { url })}
        >
          Open the sign-in page
        </button>
        {l.verification_uri && <span class="muted mono small">{l.verification_uri}</span>}
      </div>
      {l.expires_at && (
        <p class="muted small" title={localTime(l.expires_at)} data-testid={`${prefix}code-expiry`}>
          The code expires {relative(l.expires_at)}.
        </p>
      )}
    </div>
  );
}

export function LoginView({ app, act }: { app: AppState; act: Act }) {
  const l = app.login;
  const central = app.central.url ?? app.bootstrap.central_url;
  return (
    <section aria-labelledby="h-login" class="stack">
      <h2 id="h-login">Login</h2>
      {app.bootstrap.login_notice && (
        <p class="banner info" data-testid="login-notice">{app.bootstrap.login_notice}</p>
      )}
      {app.mode !== 'connected' && (
        <p class="muted">
          Login is used in connected mode, to sign in to your organisation's Gatehouse. Choose
          connected mode in Settings.
        </p>
      )}
      <dl class="facts">
        <dt>Central server</dt>
        <dd class="mono">{central ?? 'not set'}</dd>
        <dt>State</dt>
        <dd data-testid="login-state" data-state={l.state}>{STATE_LABEL[l.state]}</dd>
        {(l.name || l.email) && (
          <>
            <dt>User</dt>
            <dd data-testid="login-user">
              {l.name}
              {l.name && l.email ? ' · ' : ''}
              {l.email}
            </dd>
          </>
        )}
        {l.groups.length > 0 && (
          <>
            <dt>Groups</dt>
            <dd data-testid="login-groups">{l.groups.join(', ')}</dd>
          </>
        )}
      </dl>
      {l.error && <p class="banner error" role="alert">{l.error}</p>}
      {l.state === 'pending' && l.user_code && <DeviceCode login={l} act={act} />}
      <div class="row">
        {l.state === 'signed_in' || l.state === 'pending' ? (
          <button type="button" class="secondary" data-testid="logout" onClick={() => void act('POST', 'logout')}>
            {l.state === 'pending' ? 'Cancel' : 'Log out'}
          </button>
        ) : (
          <button
            type="button"
            data-testid="login"
            disabled={app.mode !== 'connected' || !central}
            onClick={() => void act('POST', 'login')}
          >
            Log in
          </button>
        )}
      </div>
    </section>
  );
}
