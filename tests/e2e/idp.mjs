// A real OpenID Connect provider (npm `oidc-provider`, 9.x) on loopback, for
// Gatehouse's OIDC sign-in end-to-end tests. Test-only: fixed accounts, one
// static confidential client, in-memory state, plain-HTML login and consent
// pages, and a few `/__test/*` control endpoints.
//
// Environment:
//   IDP_PORT             port to bind on 127.0.0.1 (default 0 = a random free port)
//   IDP_CLIENT_ID        the client's id (default "gatehouse")
//   IDP_CLIENT_SECRET    the client's secret (default "gatehouse-secret")
//   IDP_CLIENT_CERT_PEM  path of a PEM certificate: the client authenticates with
//                        private_key_jwt (RS256) by the certificate's key instead of a secret,
//                        and every assertion must carry the certificate's thumbprints in
//                        `x5t` and `x5t#S256` (as Microsoft Entra requires); the stats count
//                        accepted assertions as `client_assertions`
//   IDP_EXTRA_CLAIMS     JSON object of claims added to every account's claims (ID token
//                        and userinfo), e.g. nested group memberships or another user id
//   IDP_REDIRECT_URIS    comma-separated redirect URIs, exact match
//                        (default "http://127.0.0.1:8080/oauth/callback")
//   IDP_REQUIRE_PKCE     "1" (default) the client must send S256 PKCE; "0" optional
//   IDP_ROTATE_REFRESH   "1" (default) every refresh returns a new refresh token and
//                        consumes the old one (reusing a consumed one is invalid_grant AND
//                        revokes the whole grant, the new token included); "0" the refresh
//                        token stays valid and every refresh response repeats the same value
//   IDP_ACCESS_TOKEN_TTL seconds (default 3600)
//   IDP_ID_TOKEN_TTL     seconds (default 3600)
//   IDP_REFRESH_TOKEN_TTL seconds (default 1209600 = 14 days)
//   IDP_LOG              "1": log every request to stderr (default quiet)
//   IDP_IGNORE_STDIN     "1": do not exit when stdin closes (for running it by hand)
//
// Stdout carries exactly one line, `idp listening on http://127.0.0.1:PORT`, once
// listening (the issuer is exactly `http://127.0.0.1:PORT`, no trailing slash).
// Everything else goes to stderr. Exits when stdin closes, and on SIGTERM/SIGINT.
//
// Accounts (password for all: "secret-password"); `sub` is the account name:
//   alice, bob, eve, mallory, carol (see ACCOUNTS below).
//
// Control endpoints (JSON, same port):
//   POST /__test/disable    {"account":"alice"}                 -> 204
//   POST /__test/enable     {"account":"alice"}                 -> 204
//   POST /__test/groups     {"account":"alice","groups":["x"]}  -> 204 (null removes the claim)
//   POST /__test/fail-token {"count":1,"status":503}            -> 204
//   POST /__test/delay-token {"ms":300}                         -> 204 (every token request waits; 0 stops)
//   GET  /__test/stats      -> 200 {"total":N,"by_grant_type":{..},"by_status":{..},"injected_failures":N}
//   POST /__test/reset-stats                                     -> 204

import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';

// oidc-provider prints its notices with console.info (stdout); stdout must carry
// only the "listening" line, so send console.log/info to stderr before loading it.
console.log = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

const { default: Provider, errors } = await import('oidc-provider');

const env = process.env;
const PORT = Number.parseInt(env.IDP_PORT ?? '0', 10) || 0;
const CLIENT_ID = env.IDP_CLIENT_ID || 'gatehouse';
const CLIENT_SECRET = env.IDP_CLIENT_SECRET || 'gatehouse-secret';
const REDIRECT_URIS = (env.IDP_REDIRECT_URIS || 'http://127.0.0.1:8080/oauth/callback')
  .split(',').map((s) => s.trim()).filter(Boolean);
const REQUIRE_PKCE = env.IDP_REQUIRE_PKCE !== '0';
const ROTATE_REFRESH = env.IDP_ROTATE_REFRESH !== '0';
const secs = (name, dflt) => {
  const n = Number.parseInt(env[name] ?? '', 10);
  return Number.isFinite(n) && n > 0 ? n : dflt;
};
const ACCESS_TOKEN_TTL = secs('IDP_ACCESS_TOKEN_TTL', 3600);
const ID_TOKEN_TTL = secs('IDP_ID_TOKEN_TTL', 3600);
const REFRESH_TOKEN_TTL = secs('IDP_REFRESH_TOKEN_TTL', 14 * 24 * 3600);
const LOG = env.IDP_LOG === '1';
const CLIENT_CERT = env.IDP_CLIENT_CERT_PEM
  ? new crypto.X509Certificate(fs.readFileSync(env.IDP_CLIENT_CERT_PEM, 'utf8'))
  : null;
const EXTRA_CLAIMS = env.IDP_EXTRA_CLAIMS ? JSON.parse(env.IDP_EXTRA_CLAIMS) : {};
// A certificate fingerprint ("AB:CD:...") as a JOSE thumbprint (base64url of the digest).
const thumbprint = (fp) => Buffer.from(fp.replace(/:/g, ''), 'hex').toString('base64url');

const PASSWORD = 'secret-password';

// Fixed accounts. A missing property means the claim is not issued at all.
const ACCOUNTS = {
  alice: { email: 'alice@corp.example', email_verified: true, name: 'Alice Example', groups: ['engineering', 'claude-users'] },
  bob: { email: 'bob@corp.example', email_verified: true, name: 'Bob Example', groups: ['sales'] },
  eve: { email: 'eve@evil.example', email_verified: true, name: 'Eve Outsider', groups: ['claude-users'] },
  mallory: { email: 'mallory@corp.example', email_verified: false, name: 'Mallory Example', groups: ['claude-users'] },
  carol: { email: 'carol@corp.example', email_verified: true, name: 'Carol Example' }, // no groups claim
};
const disabled = new Set();

function accountClaims(id) {
  const a = ACCOUNTS[id];
  const claims = { ...structuredClone(EXTRA_CLAIMS), sub: id };
  for (const k of ['email', 'email_verified', 'name', 'groups']) {
    if (a[k] !== undefined && a[k] !== null) claims[k] = Array.isArray(a[k]) ? [...a[k]] : a[k];
  }
  return claims;
}

async function findAccount(_ctx, id) {
  if (!Object.hasOwn(ACCOUNTS, id) || disabled.has(id)) return undefined;
  return {
    accountId: id,
    async claims() { return accountClaims(id); },
  };
}

// Test counters and failure injection for the token endpoint.
const stats = { total: 0, by_grant_type: {}, by_status: {}, injected_failures: 0, client_assertions: 0 };
const failToken = { count: 0, status: 503 };
const delayToken = { ms: 0 };
const bump = (obj, key) => { obj[key] = (obj[key] || 0) + 1; };

const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({
  '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
}[c]));

// Self-contained pages: no external fonts, styles or scripts (the machine has
// no network, and a browser must not try to reach anything off loopback).
function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>body{font-family:sans-serif;max-width:28em;margin:3em auto;padding:0 1em}
label{display:block;margin:.6em 0 .2em}input{width:100%;padding:.4em;box-sizing:border-box}
button{margin-top:1em;padding:.5em 1.2em}.error{color:#b00020}.muted{color:#666}</style>
</head><body><h2>Test IdP</h2>${body}</body></html>`;
}

function loginPage(uid, params, error, login = '') {
  return page('Sign in', `
<h1>Sign in</h1>
<p class="muted">to <b>${esc(params.client_id)}</b></p>
${error ? `<p class="error" id="error">${esc(error)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
  <label for="login">Login</label>
  <input name="login" id="login" value="${esc(login)}" autofocus>
  <label for="password">Password</label>
  <input name="password" id="password" type="password">
  <button type="submit" id="signin">Sign in</button>
</form>
<form method="post" action="/interaction/${esc(uid)}/abort">
  <button type="submit" id="cancel">Cancel</button>
</form>`);
}

function consentPage(uid, params, accountId, details) {
  const scopes = [...new Set([...(details.missingOIDCScope || []), ...String(params.scope || '').split(' ').filter(Boolean)])];
  return page('Authorize', `
<h1>Authorize</h1>
<p><b>${esc(params.client_id)}</b> asks to access the account <b id="account">${esc(accountId)}</b>.</p>
<ul id="scopes">${scopes.map((s) => `<li>${esc(s)}</li>`).join('')}</ul>
<form method="post" action="/interaction/${esc(uid)}/confirm">
  <button type="submit" id="allow">Allow</button>
</form>
<form method="post" action="/interaction/${esc(uid)}/abort">
  <button type="submit" id="deny">Deny</button>
</form>`);
}

const configuration = {
  clients: [{
    client_id: CLIENT_ID,
    ...(CLIENT_CERT ? {
      token_endpoint_auth_method: 'private_key_jwt',
      token_endpoint_auth_signing_alg: 'RS256',
      jwks: { keys: [{ ...CLIENT_CERT.publicKey.export({ format: 'jwk' }), use: 'sig', alg: 'RS256' }] },
    } : {
      client_secret: CLIENT_SECRET,
      // client_secret_basic is the registered method; oidc-provider accepts
      // client_secret_post as well for any client registered with a secret method.
      token_endpoint_auth_method: 'client_secret_basic',
    }),
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: REDIRECT_URIS,
    id_token_signed_response_alg: 'RS256',
    application_type: 'web',
  }],
  jwks: { keys: [signingKey()] },
  cookies: {
    keys: ['gatehouse-test-idp-cookie-key-1', 'gatehouse-test-idp-cookie-key-0'],
    // Cookies are only marked Secure when the request is https; this is plain http.
    long: { httpOnly: true, sameSite: 'lax' },
    short: { httpOnly: true, sameSite: 'lax' },
  },
  // `groups` rides with the openid scope so it is released whenever openid is
  // granted (the RP asks for "openid profile email offline_access"); a separate
  // `groups` scope exists too for RPs that ask for it.
  claims: {
    openid: ['sub', 'groups', ...Object.keys(EXTRA_CLAIMS)],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'offline_access', 'profile', 'email', 'groups'],
  responseTypes: ['code'],
  conformIdTokenClaims: false, // scope claims go INTO the id_token (and userinfo)
  findAccount,
  features: {
    devInteractions: { enabled: false },
    revocation: { enabled: true },
    userinfo: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.body = page('Sign out', `<h1>Sign out?</h1>${form}
<button type="submit" form="op.logoutForm" id="logout" name="logout" value="yes">Sign out</button>
<button type="submit" form="op.logoutForm" id="stay">Stay signed in</button>`);
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = page('Signed out', '<h1 id="signed-out">Signed out</h1>');
      },
    },
  },
  pkce: { required: () => REQUIRE_PKCE },
  // A refresh token on every code exchange for a client allowed refresh_token,
  // whether or not offline_access survived (oidc-provider drops offline_access
  // when the request carries a `prompt` without `consent`).
  async issueRefreshToken(_ctx, client) {
    return client.grantTypeAllowed('refresh_token');
  },
  rotateRefreshToken: () => ROTATE_REFRESH,
  // Refresh tokens outlive the IdP browser session (the browser is gone after the device flow).
  async expiresWithSession() { return false; },
  interactions: {
    url(_ctx, interaction) { return `/interaction/${interaction.uid}`; },
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Error', `<h1 id="idp-error">Error</h1>
<p id="error">${esc(out.error)}</p><p id="error_description">${esc(out.error_description)}</p>`);
  },
  // With a client certificate, the assertion must name it by its thumbprints.
  async assertJwtClientAuthClaimsAndHeader(_ctx, _claims, header) {
    if (!CLIENT_CERT) return;
    if (header.x5t !== thumbprint(CLIENT_CERT.fingerprint)
      || header['x5t#S256'] !== thumbprint(CLIENT_CERT.fingerprint256)) {
      throw new errors.InvalidClientAuth('x5t / x5t#S256 do not match the registered certificate');
    }
    stats.client_assertions += 1;
  },
  clientBasedCORS: () => false,
  ttl: {
    AccessToken: ACCESS_TOKEN_TTL,
    AuthorizationCode: 120,
    IdToken: ID_TOKEN_TTL,
    RefreshToken: REFRESH_TOKEN_TTL,
    Interaction: 3600,
    Session: 14 * 24 * 3600,
    Grant: 14 * 24 * 3600,
  },
};

function signingKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: `test-${crypto.randomBytes(6).toString('hex')}`, alg: 'RS256', use: 'sig' };
}

function readBody(req, limit = 1 << 20) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > limit) { reject(new Error('body too large')); req.destroy(); return; }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res, status, body, type = 'application/json') {
  const payload = body === undefined ? '' : (typeof body === 'string' ? body : JSON.stringify(body));
  res.statusCode = status;
  if (payload) res.setHeader('Content-Type', type === 'html' ? 'text/html; charset=utf-8' : type);
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Length', Buffer.byteLength(payload));
  res.end(payload);
}

async function handleTest(req, res, path) {
  let body = {};
  if (req.method === 'POST') {
    const raw = await readBody(req);
    if (raw.trim()) {
      try { body = JSON.parse(raw); } catch { return send(res, 400, { error: 'invalid JSON body' }); }
    }
  }
  const needAccount = () => {
    if (!Object.hasOwn(ACCOUNTS, body.account)) {
      send(res, 400, { error: `unknown account ${JSON.stringify(body.account)}` });
      return false;
    }
    return true;
  };
  switch (`${req.method} ${path}`) {
    case 'POST /__test/disable':
      if (!needAccount()) return undefined;
      disabled.add(body.account);
      return send(res, 204);
    case 'POST /__test/enable':
      if (!needAccount()) return undefined;
      disabled.delete(body.account);
      return send(res, 204);
    case 'POST /__test/groups':
      if (!needAccount()) return undefined;
      if (body.groups === null) {
        delete ACCOUNTS[body.account].groups;
      } else if (Array.isArray(body.groups) && body.groups.every((g) => typeof g === 'string')) {
        ACCOUNTS[body.account].groups = [...body.groups];
      } else {
        return send(res, 400, { error: 'groups must be an array of strings or null' });
      }
      return send(res, 204);
    case 'POST /__test/fail-token': {
      const count = Number.isInteger(body.count) ? body.count : 1;
      const status = Number.isInteger(body.status) ? body.status : 503;
      if (count < 0 || status < 400 || status > 599) return send(res, 400, { error: 'count >= 0, 400 <= status <= 599' });
      failToken.count = count;
      failToken.status = status;
      return send(res, 204);
    }
    case 'POST /__test/delay-token': {
      const ms = Number.isInteger(body.ms) ? body.ms : 0;
      if (ms < 0 || ms > 10000) return send(res, 400, { error: '0 <= ms <= 10000' });
      delayToken.ms = ms;
      return send(res, 204);
    }
    case 'GET /__test/stats':
      return send(res, 200, stats);
    case 'POST /__test/reset-stats':
      stats.total = 0;
      stats.by_grant_type = {};
      stats.by_status = {};
      stats.injected_failures = 0;
      stats.client_assertions = 0;
      return send(res, 204);
    default:
      return send(res, 404, { error: 'no such test endpoint' });
  }
}

async function handleInteraction(provider, req, res, url) {
  const m = url.pathname.match(/^\/interaction\/([^/]+)(?:\/(login|confirm|abort))?$/);
  if (!m) return send(res, 404, page('Not found', '<h1>Not found</h1>'), 'html');
  const [, uid, action] = m;
  let details;
  try {
    details = await provider.interactionDetails(req, res);
  } catch (err) {
    return send(res, 400, page('Error', `<h1 id="idp-error">Error</h1><p id="error">${esc(err.error || err.message)}</p>
<p id="error_description">${esc(err.error_description || '')}</p>`), 'html');
  }
  if (details.uid !== uid) return send(res, 400, page('Error', '<h1 id="idp-error">Error</h1><p id="error">interaction mismatch</p>'), 'html');
  const { prompt, params, session } = details;

  if (!action) {
    if (req.method !== 'GET') return send(res, 405, '');
    if (prompt.name === 'login') return send(res, 200, loginPage(uid, params), 'html');
    if (prompt.name === 'consent') return send(res, 200, consentPage(uid, params, session?.accountId, prompt.details), 'html');
    return send(res, 400, page('Error', `<h1 id="idp-error">Error</h1><p id="error">unknown prompt ${esc(prompt.name)}</p>`), 'html');
  }
  if (req.method !== 'POST') return send(res, 405, '');
  const form = new URLSearchParams(await readBody(req));

  if (action === 'abort') {
    return provider.interactionFinished(req, res, {
      error: 'access_denied',
      error_description: 'End-User aborted interaction',
    }, { mergeWithLastSubmission: false });
  }

  if (action === 'login') {
    if (prompt.name !== 'login') return send(res, 400, page('Error', '<h1 id="idp-error">Error</h1><p id="error">not a login prompt</p>'), 'html');
    const login = (form.get('login') || '').trim();
    const password = form.get('password') || '';
    if (!Object.hasOwn(ACCOUNTS, login) || password !== PASSWORD) {
      return send(res, 200, loginPage(uid, params, 'Invalid login or password.', login), 'html');
    }
    if (disabled.has(login)) {
      return send(res, 200, loginPage(uid, params, 'This account is disabled.', login), 'html');
    }
    return provider.interactionFinished(req, res, {
      login: { accountId: login, amr: ['pwd'], remember: false },
    }, { mergeWithLastSubmission: false });
  }

  // action === 'confirm': grant everything that was asked for, offline_access included.
  if (prompt.name !== 'consent') return send(res, 400, page('Error', '<h1 id="idp-error">Error</h1><p id="error">not a consent prompt</p>'), 'html');
  const accountId = session.accountId;
  let { grantId } = details;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId, clientId: params.client_id });
  const d = prompt.details || {};
  const requested = String(params.scope || '').split(' ').filter(Boolean);
  const oidcScopes = new Set([...(d.missingOIDCScope || []), ...requested.filter((s) => configuration.scopes.includes(s))]);
  if (oidcScopes.size) grant.addOIDCScope([...oidcScopes].join(' '));
  if (d.missingOIDCClaims?.length) grant.addOIDCClaims(d.missingOIDCClaims);
  if (d.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(d.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  const savedId = await grant.save();
  const consent = {};
  if (!grantId) { grantId = savedId; consent.grantId = savedId; }
  return provider.interactionFinished(req, res, { consent }, { mergeWithLastSubmission: true });
}

const server = http.createServer();
server.keepAliveTimeout = 5000;
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(PORT, '127.0.0.1', resolve);
});
const { port } = server.address();
const ISSUER = `http://127.0.0.1:${port}`;

const provider = new Provider(ISSUER, configuration);

provider.on('server_error', (_ctx, err) => console.error('idp server_error:', err));

// oidc-provider drops offline_access from an authorization request unless its
// `prompt` includes `consent`. An RP that asks for offline_access without any
// `prompt` gets `prompt=consent` added here, so offline_access is granted (and
// shows in the token response's `scope`); consent is asked on every fresh
// browser session anyway. A refresh token is issued regardless (issueRefreshToken).
provider.use(async (ctx, next) => {
  if (ctx.method === 'GET' && ctx.path === '/auth') {
    const { scope, prompt } = ctx.query;
    if (typeof scope === 'string' && scope.split(' ').includes('offline_access') && prompt === undefined) {
      ctx.querystring = `${ctx.querystring}&prompt=consent`;
    }
  }
  return next();
});

// Token endpoint: failure injection and counters (runs before oidc-provider's routes).
provider.use(async (ctx, next) => {
  if (ctx.method !== 'POST' || ctx.path !== '/token') return next();
  stats.total += 1;
  if (delayToken.ms > 0) await new Promise((resolve) => { setTimeout(resolve, delayToken.ms); });
  if (failToken.count > 0) {
    failToken.count -= 1;
    stats.injected_failures += 1;
    const raw = await readBody(ctx.req).catch(() => '');
    bump(stats.by_grant_type, new URLSearchParams(raw).get('grant_type') || 'unknown');
    bump(stats.by_status, String(failToken.status));
    ctx.status = failToken.status;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { error: 'temporarily_unavailable', error_description: 'injected failure (test)' };
    return undefined;
  }
  try {
    await next();
  } finally {
    bump(stats.by_grant_type, ctx.oidc?.params?.grant_type || ctx.oidc?.body?.grant_type || 'unknown');
    bump(stats.by_status, String(ctx.status));
  }
  return undefined;
});

const providerCallback = provider.callback();

server.on('request', (req, res) => {
  const url = new URL(req.url, ISSUER);
  if (LOG) {
    res.on('finish', () => console.error(`idp ${req.method} ${url.pathname} -> ${res.statusCode}`));
  }
  let handled;
  if (url.pathname.startsWith('/__test/')) {
    handled = handleTest(req, res, url.pathname);
  } else if (url.pathname.startsWith('/interaction/')) {
    handled = handleInteraction(provider, req, res, url);
  } else {
    providerCallback(req, res);
    return;
  }
  handled.catch((err) => {
    console.error('idp handler error:', err);
    if (!res.headersSent) send(res, 500, { error: 'server_error', error_description: String(err?.message || err) });
    else res.destroy();
  });
});

let stopping = false;
function stop(why) {
  if (stopping) return;
  stopping = true;
  if (LOG) console.error(`idp stopping (${why})`);
  server.close();
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 200).unref();
  process.exitCode = 0;
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
if (env.IDP_IGNORE_STDIN !== '1') {
  process.stdin.on('end', () => stop('stdin closed'));
  process.stdin.on('close', () => stop('stdin closed'));
  process.stdin.on('error', () => stop('stdin error'));
  process.stdin.resume();
}

process.stdout.write(`idp listening on ${ISSUER}\n`);
