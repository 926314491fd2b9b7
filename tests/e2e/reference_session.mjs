// A session on the reference gateway (`claude gateway`) from its own RFC 8628 device
// flow, for the benchmark's peers mode (crates/bench, `gatehouse-bench --peers`): asks
// the gateway for a device code, approves it in Debian's headless Chromium (driven by
// npm `playwright-core`; no browser is downloaded) through the reference's verification
// page and the test IdP (idp.mjs), then polls the token endpoint until the session
// arrives.
//
// Environment:
//   GATEWAY        required; the gateway's base URL, e.g. http://127.0.0.1:PORT
//   LOGIN          required; IdP account name (idp.mjs: alice, bob, ...)
//   PASSWORD       required; its password
//   CHROMIUM       optional; browser executable (default /usr/bin/chromium)
//   TIMEOUT_SECS   optional; overall timeout (default 90)
//
// Stdout: exactly one JSON line.
//   success (exit 0): {"access_token","expires_in","pages":[...]}
//   failure (exit 1): {"error","url","pages":[...]} (never a token)
//
// The reference's verification page (GET /device?user_code=...) shows the code and a
// submit button (`button.go`, "This matches my device — continue"); its form posts to
// /device, which sends the browser to the IdP, whose login and consent pages lead back
// to the gateway's /oauth/callback.

import { launchChromium } from './chromium.mjs';

const env = process.env;
const GATEWAY = (env.GATEWAY || '').replace(/\/+$/, '');
const TIMEOUT_MS = (Number.parseFloat(env.TIMEOUT_SECS || '') || 90) * 1000;
const STEP_MS = 20_000;
const started = Date.now();
const pages = [];
let browser;
let page;

const remaining = () => Math.max(1, TIMEOUT_MS - 5000 - (Date.now() - started));
const stepTimeout = () => Math.min(STEP_MS, remaining());
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

class Failure extends Error {}

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

async function post(path, form) {
  const resp = await fetch(`${GATEWAY}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'user-agent': 'claude-code/2.1.332' },
    body: new URLSearchParams(form).toString(),
    signal: AbortSignal.timeout(stepTimeout()),
  });
  let body = {};
  try { body = await resp.json(); } catch { /* not JSON */ }
  return { status: resp.status, body };
}

async function clickAndWaitNav(selector) {
  const nav = page.waitForEvent('framenavigated', {
    predicate: (f) => f === page.mainFrame(),
    timeout: stepTimeout(),
  });
  await page.click(selector, { timeout: stepTimeout() });
  await nav;
  await page.waitForLoadState('domcontentloaded', { timeout: stepTimeout() });
}

// The person's half: approve `uri` (verification_uri_complete) as LOGIN.
async function approve(uri) {
  browser = await launchChromium(stepTimeout());
  const context = await browser.newContext();
  page = await context.newPage();
  page.on('framenavigated', (f) => { if (f === page.mainFrame()) pages.push(f.url().split('?')[0]); });
  const resp = await page.goto(uri, { waitUntil: 'domcontentloaded', timeout: stepTimeout() });
  if (resp && resp.status() >= 400) throw new Failure(`the verification page answered HTTP ${resp.status()}`);
  if (!(await page.$('button.go'))) throw new Failure('no continue button (button.go) on the verification page');
  await clickAndWaitNav('button.go');
  let logins = 0;
  let consents = 0;
  // Login, consent, back to the gateway: a handful of pages at most.
  for (let step = 0; step < 6; step += 1) {
    if (await page.$('#login')) {
      if (logins > 0) throw new Failure('the IdP rejected the login');
      logins += 1;
      await page.fill('#login', env.LOGIN, { timeout: stepTimeout() });
      await page.fill('#password', env.PASSWORD, { timeout: stepTimeout() });
      await clickAndWaitNav('#signin');
      continue;
    }
    if (await page.$('#allow')) {
      if (consents > 0) throw new Failure('the IdP asked for consent twice');
      consents += 1;
      await clickAndWaitNav('#allow');
      continue;
    }
    if (await page.$('#idp-error')) throw new Failure('the IdP showed an error page');
    if (page.url().startsWith(GATEWAY)) return;
    await sleep(200);
  }
  throw new Failure('the browser never came back to the gateway');
}

async function main() {
  if (!GATEWAY || !env.LOGIN || env.PASSWORD === undefined) throw new Failure('GATEWAY, LOGIN and PASSWORD must be set');
  const dev = await post('/oauth/device_authorization', { surface: 'claude_code' });
  if (dev.status !== 200 || !dev.body.device_code || !dev.body.verification_uri_complete) {
    throw new Failure(`device authorization answered HTTP ${dev.status}`);
  }
  await approve(dev.body.verification_uri_complete);
  await browser.close().catch(() => {});
  browser = undefined;
  // Poll as the client does: `interval` seconds apart (the reference answers slow_down
  // to polls closer than that).
  const interval = (Number(dev.body.interval) || 5) * 1000;
  for (let poll = 0; poll < 20 && remaining() > 1; poll += 1) {
    const t = await post('/oauth/token', {
      grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
      device_code: dev.body.device_code,
    });
    if (t.status === 200 && t.body.access_token) {
      return { access_token: t.body.access_token, expires_in: t.body.expires_in, pages };
    }
    const error = t.body.error || `HTTP ${t.status}`;
    if (error !== 'authorization_pending' && error !== 'slow_down') throw new Failure(`token endpoint: ${error}`);
    await sleep(Math.min(error === 'slow_down' ? interval + 5000 : interval, remaining()));
  }
  throw new Failure('no session before the timeout');
}

const timer = setTimeout(() => {
  emit({ error: `overall timeout of ${TIMEOUT_MS / 1000} s`, url: '', pages });
  process.exit(1);
}, TIMEOUT_MS);

try {
  const out = await main();
  clearTimeout(timer);
  emit(out);
  process.exit(0);
} catch (err) {
  clearTimeout(timer);
  let url = '';
  try { url = page ? page.url().split('?')[0] : ''; } catch { /* closed */ }
  const message = String(err instanceof Failure ? err.message : `${err?.name || 'Error'}: ${err?.message || err}`)
    .replace(/\x1b\[[0-9;]*m/g, '');
  if (browser) await browser.close().catch(() => {});
  emit({ error: message, url, pages });
  process.exit(1);
}
