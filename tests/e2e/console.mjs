// The team console (`/console`) in a real browser: Debian's Chromium (/usr/bin/chromium)
// driven by npm `playwright-core`. No browser is ever downloaded.
//
// Environment:
//   CONSOLE_URL    required; the console page, e.g. http://127.0.0.1:PORT/console
//   LOGIN          IdP account name (the IdP of tests/e2e/idp.mjs: #login, #password,
//                  #signin, then #allow on a consent page if one shows)
//   PASSWORD       its password
//   SCENARIO       one of admin_tour, viewer, refused, revoke, signout (default admin_tour)
//   CAP_USER       admin_tour: the user id the daily limit is created for (required there)
//   CAP_DOLLARS    admin_tour: its amount in dollars (default 5)
//   REVOKE_USER    revoke: the user id whose sessions are revoked (required there)
//   POLICY_USER    admin_tour, optional: the user id for the policy preview form
//                  (default CAP_USER)
//   DOWNLOAD_DIR   admin_tour, optional: where the two CSV exports are saved (default a
//                  fresh temporary directory)
//   SCREENSHOT_DIR optional; full-page PNGs at 1280x900: console-<page>.png for every page
//                  visited (console-person.png, console-limit-preview.png, ...), error.png
//   CHROMIUM       optional; browser executable (default /usr/bin/chromium)
//   TIMEOUT_SECS   optional; overall timeout (default 90)
//   IGNORE_HTTPS_ERRORS=1 optional; accept a test certificate
//
// Stdout: exactly one JSON line.
//   success (exit 0): {"ok": true, "scenario", ...}; every scenario reports "role" (the
//     #role text, null when not signed in), "title" (document.title), "pages" (main-frame
//     URLs), "screenshots", "console_errors", "csp_violations", "xss_fired" (window.__xss
//     was set at any time, in any document) and "onerror_elements" (elements with an
//     onerror attribute in the DOM at the end), plus:
//     admin_tour: "visited" {page: {"errors": [load-error texts]}}, "person" (the user id
//       whose page was opened), "limit" {"preview_message", "preview_people",
//       "preview_replaces", "notice", "notice_kind"}, "explain" {"state", "text"},
//       "policy_preview" {"text"}, "audit_csv" / "analytics_csv" (saved paths),
//       "audit_csv_bytes" / "analytics_csv_bytes", "audit_csv_head" / "analytics_csv_head"
//       (first line), "download_names" (the browser's suggested file names)
//     viewer: "edit_controls_enabled" (visible, enabled save/delete/revoke/pause controls
//       summed over People, a person's page, Groups & budgets and Spend limits),
//       "readonly_badge" (a .readonly-badge is visible), "edit_controls_by_page"
//     refused: "signed_in" (the console loaded after all), "final_url", "status" (HTTP
//       status of the last main-frame navigation), "text" (visible text, first 2000 chars)
//     revoke: "user", "notice", "notice_kind", "revoked_before" (the person page's line)
//     signout: "cookie" {"name", "value"} (the console session cookie before sign-out,
//       read with context.cookies()), "signin_shown", "cookie_after" (still in the jar
//       after sign-out: null or {"name","value"})
//   failure (exit 1): {"ok": false, "scenario", "error", "url", "html" (first 2000 chars),
//     "pages", "console_errors", "csp_violations"}

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { closeWithin, failureReport, launchChromium } from './chromium.mjs';

const env = process.env;
const CONSOLE_URL = env.CONSOLE_URL || '';
const LOGIN = env.LOGIN;
const PASSWORD = env.PASSWORD;
const SCENARIO = env.SCENARIO || 'admin_tour';
const SCREENSHOT_DIR = env.SCREENSHOT_DIR || '';
const TIMEOUT_MS = (Number.parseFloat(env.TIMEOUT_SECS || '') || 90) * 1000;
const WORK_MS = TIMEOUT_MS - Math.min(5000, TIMEOUT_MS * 0.5);
const STEP_MS = 20_000;
const PAGES = ['overview', 'people', 'budgets', 'limits', 'audit', 'analytics', 'routing', 'policies'];

const started = Date.now();
const pages = [];
const screenshots = [];
const consoleErrors = [];
const cspViolations = [];
let xssFired = false;
let browser;
let context;
let page;
let finished = false;
let lastNav = null;

const remaining = () => Math.max(1, WORK_MS - (Date.now() - started));
const stepTimeout = () => Math.min(STEP_MS, remaining());
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

class Failure extends Error {}

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

async function closeBrowser() {
  const b = browser;
  browser = undefined;
  await closeWithin(b);
}

async function shot(name) {
  if (!SCREENSHOT_DIR || !page) return;
  const file = path.join(SCREENSHOT_DIR, `console-${name}.png`);
  try {
    await page.screenshot({ path: file, fullPage: true, timeout: 10_000 });
    screenshots.push(file);
  } catch (err) {
    process.stderr.write(`console: screenshot ${file} failed: ${err.message}\n`);
  }
}

async function fail(message) {
  if (finished) return;
  finished = true;
  const errorShot = SCREENSHOT_DIR ? path.join(SCREENSHOT_DIR, 'error.png') : '';
  const report = await failureReport(page, message, errorShot);
  emit({
    ok: false,
    scenario: SCENARIO,
    ...report,
    pages,
    console_errors: consoleErrors,
    csp_violations: cspViolations,
  });
  await closeBrowser();
  process.exit(1);
}

async function clickAndWaitNav(selector) {
  const nav = page.waitForEvent('framenavigated', { predicate: (f) => f === page.mainFrame(), timeout: stepTimeout() });
  await page.click(selector, { timeout: stepTimeout() });
  await nav;
  await page.waitForLoadState('domcontentloaded', { timeout: stepTimeout() });
}

async function textOf(selector) {
  const el = await page.$(selector);
  if (!el) return null;
  return ((await el.textContent()) || '').trim();
}

async function visible(selector) {
  const el = await page.$(selector);
  return el ? el.isVisible() : false;
}

const sameOrigin = (url) => {
  try {
    return new URL(url).origin === new URL(CONSOLE_URL).origin;
  } catch {
    return false;
  }
};

/** The first of `selectors` (in this order) present in the page, waiting up to `ms`. */
async function firstOf(selectors, ms) {
  try {
    await page.waitForSelector(selectors.join(', '), { state: 'attached', timeout: ms });
  } catch {
    return null;
  }
  for (const s of selectors) if (await page.$(s)) return s;
  return null;
}

/**
 * Open the console and sign in through the IdP. Returns 'in' (the console shows #role) or
 * 'refused' (the gateway answered an error page of its own after the IdP).
 */
async function signIn() {
  const resp = await page.goto(CONSOLE_URL, { waitUntil: 'domcontentloaded', timeout: stepTimeout() });
  if (resp && resp.status() >= 400) throw new Failure(`GET CONSOLE_URL answered HTTP ${resp.status()}`);
  let logins = 0;
  let consents = 0;
  let cards = 0;
  for (let round = 0; round < 10; round += 1) {
    // After the IdP, the gateway's own error page (403: not in the admin or viewer groups).
    if (round > 0 && sameOrigin(page.url()) && lastNav && lastNav.status >= 400) return 'refused';
    const which = await firstOf(
      ['#role', '#login', '#allow', '#idp-error', '[data-testid="me-error"]', '#signin'],
      round > 0 && sameOrigin(page.url()) ? Math.min(8000, stepTimeout()) : stepTimeout(),
    );
    if (which === null) {
      if (sameOrigin(page.url()) && lastNav && lastNav.status >= 400) return 'refused';
      throw new Failure('no console (#role), sign-in card (#signin) or IdP page (#login, #allow) appeared');
    }
    if (which === '#role') return 'in';
    if (which === '#login') {
      if (logins > 0) throw new Failure(`login rejected: ${(await textOf('#error')) ?? 'the IdP showed its login form again'}`);
      if (!LOGIN || PASSWORD === undefined) throw new Failure('LOGIN and PASSWORD must be set');
      logins += 1;
      await page.fill('#login', LOGIN, { timeout: stepTimeout() });
      await page.fill('#password', PASSWORD, { timeout: stepTimeout() });
      await clickAndWaitNav('#signin');
      continue;
    }
    if (which === '#allow') {
      if (consents > 0) throw new Failure('the consent page came back after answering it');
      consents += 1;
      await clickAndWaitNav('#allow');
      continue;
    }
    if (which === '#idp-error') {
      throw new Failure(`IdP error page: ${await textOf('#error')}${(await textOf('#error_description')) ? `: ${await textOf('#error_description')}` : ''}`);
    }
    if (which === '[data-testid="me-error"]') {
      throw new Failure(`the console could not start: ${await textOf('[data-testid="me-error"]')}`);
    }
    // The console's sign-in card.
    if (cards > 0) throw new Failure('the sign-in card came back after signing in at the IdP');
    cards += 1;
    await shot('signin');
    await clickAndWaitNav('#signin a[href$="/console/login"]');
  }
  throw new Failure('sign-in did not finish');
}

/** Wait until the current console page has finished loading (no spinner line left). */
async function settled(pageId) {
  await page.waitForSelector(`[data-page="${pageId}"]`, { timeout: stepTimeout() });
  await page
    .waitForFunction(() => document.querySelectorAll('main .loading-line').length === 0, null, { timeout: Math.min(10_000, stepTimeout()) })
    .catch(() => {});
}

async function go(pageId) {
  await page.click(`a[data-nav="${pageId}"]`, { timeout: stepTimeout() });
  await settled(pageId);
}

async function loadErrors() {
  return page.$$eval('[data-testid="load-error"] .banner-text', (els) => els.map((e) => (e.textContent || '').trim()));
}

async function waitNotice() {
  await page.waitForSelector('#notice', { state: 'visible', timeout: stepTimeout() });
  return { notice: await textOf('#notice .banner-text'), notice_kind: await page.getAttribute('#notice', 'data-kind') };
}

async function security() {
  const dom = await page.evaluate(() => ({
    xss: window.__xssSeen === true,
    onerror: document.querySelectorAll('[onerror]').length,
    title: document.title,
  }));
  return { xss_fired: xssFired || dom.xss, onerror_elements: dom.onerror, title: dom.title };
}

async function saveDownload(selector, dir, fallback) {
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: stepTimeout() }),
    page.click(selector, { timeout: stepTimeout() }),
  ]);
  const name = download.suggestedFilename() || fallback;
  const file = path.join(dir, fallback);
  await download.saveAs(file);
  const failure = await download.failure();
  if (failure) throw new Failure(`download ${selector} failed: ${failure}`);
  const text = fs.readFileSync(file, 'utf8');
  return { file, name, bytes: Buffer.byteLength(text), head: text.split(/\r?\n/)[0] ?? '' };
}

async function adminTour() {
  const capUser = env.CAP_USER;
  if (!capUser) throw new Failure('CAP_USER must be set for admin_tour');
  const capDollars = env.CAP_DOLLARS || '5';
  if ((await signIn()) !== 'in') throw new Failure(`the gateway refused the sign-in (HTTP ${lastNav?.status})`);
  const role = await textOf('#role');
  const visited = {};
  const out = { role };

  for (const id of PAGES) {
    await go(id);
    if (id === 'overview') {
      // uPlot draws after layout: give the chart a moment.
      await page.waitForSelector('[data-testid="chart-daily"] canvas, [data-testid="chart-daily-empty"]', { timeout: 5000 }).catch(() => {});
    }
    if (id === 'routing') {
      await page.click('#explain-run', { timeout: stepTimeout() });
      await page.waitForSelector('#explain-result:not([data-state="empty"])', { timeout: stepTimeout() });
      out.explain = {
        state: await page.getAttribute('#explain-result', 'data-state'),
        text: ((await textOf('#explain-result')) ?? '').slice(0, 2000),
      };
    }
    if (id === 'policies') {
      await page.fill('#policy-user', env.POLICY_USER || capUser, { timeout: stepTimeout() });
      await page.click('#policy-preview', { timeout: stepTimeout() });
      await page.waitForSelector('#policy-result > *', { timeout: stepTimeout() }).catch(() => {});
      out.policy_preview = { text: ((await textOf('#policy-result')) ?? '').slice(0, 2000) };
    }
    visited[id] = { errors: await loadErrors() };
    await shot(id);
  }

  // A person's page: CAP_USER's row when listed, else the first person.
  await go('people');
  await page.waitForSelector('tr[data-user]', { timeout: stepTimeout() }).catch(() => {});
  let person = null;
  if (await page.$(`tr[data-user=${JSON.stringify(capUser)}]`).catch(() => null)) person = capUser;
  if (!person) person = await page.getAttribute('tr[data-user]', 'data-user').catch(() => null);
  if (!person) person = capUser;
  await page.evaluate((id) => { window.location.hash = `#people/${encodeURIComponent(id)}`; }, person);
  await settled('person');
  visited.person = { errors: await loadErrors() };
  await shot('person');
  out.person = person;

  // A daily limit for CAP_USER through the form: preview, then confirm.
  await go('limits');
  await page.selectOption('#limit-scope-type', 'user', { timeout: stepTimeout() });
  await page.fill('#limit-scope-id', capUser, { timeout: stepTimeout() });
  await page.selectOption('#limit-period', 'daily', { timeout: stepTimeout() });
  await page.selectOption('#limit-model', '', { timeout: stepTimeout() });
  await page.fill('#limit-amount', String(capDollars), { timeout: stepTimeout() });
  await page.click('#limit-save', { timeout: stepTimeout() });
  const shown = await firstOf(['#preview-message', '[data-testid="dialog-error"]', '[data-testid="form-error"]'], stepTimeout());
  if (shown !== '#preview-message') {
    await shot('limit-preview');
    throw new Failure(`no limit preview: ${shown ? await textOf(shown) : 'nothing appeared'}`);
  }
  await shot('limit-preview');
  const limit = {
    preview_message: await textOf('#preview-message'),
    preview_people: await textOf('[data-testid="preview-people"]'),
    preview_replaces: await textOf('[data-testid="preview-replaces"]'),
  };
  await page.click('#confirm', { timeout: stepTimeout() });
  Object.assign(limit, await waitNotice());
  await page.waitForSelector('[data-testid="confirm-dialog"]', { state: 'detached', timeout: stepTimeout() }).catch(() => {});
  await shot('limits-saved');
  out.limit = limit;
  if (limit.notice_kind !== 'ok') throw new Failure(`saving the limit failed: ${limit.notice}`);

  // The two CSV exports, as the browser downloads them.
  const dir = env.DOWNLOAD_DIR || fs.mkdtempSync(path.join(os.tmpdir(), 'console-downloads-'));
  fs.mkdirSync(dir, { recursive: true });
  await go('audit');
  const audit = await saveDownload('#audit-export', dir, 'audit.csv');
  await go('analytics');
  const analytics = await saveDownload('#analytics-export', dir, 'analytics.csv');
  Object.assign(out, {
    visited,
    audit_csv: audit.file,
    audit_csv_bytes: audit.bytes,
    audit_csv_head: audit.head,
    analytics_csv: analytics.file,
    analytics_csv_bytes: analytics.bytes,
    analytics_csv_head: analytics.head,
    download_names: [audit.name, analytics.name],
  });
  return out;
}

/** Visible, enabled buttons that would change something. */
async function editControls() {
  return page.evaluate(() => {
    const words = /^(save|review and save|delete|revoke|revoke sessions|pause|resume|confirm)/i;
    const shown = (el) => {
      const r = el.getBoundingClientRect();
      const s = getComputedStyle(el);
      return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none';
    };
    const set = new Set([
      ...document.querySelectorAll('#limit-save, #revoke-sessions, [data-edit]'),
      ...[...document.querySelectorAll('button')].filter((b) => words.test((b.textContent || '').trim())),
    ]);
    return [...set].filter((b) => shown(b) && !b.disabled && !b.closest('fieldset:disabled')).length;
  });
}

async function viewer() {
  if ((await signIn()) !== 'in') throw new Failure(`the gateway refused the sign-in (HTTP ${lastNav?.status})`);
  const role = await textOf('#role');
  const byPage = {};
  let badge = await visible('.readonly-badge');
  await go('people');
  await page.waitForSelector('tr[data-user]', { timeout: 5000 }).catch(() => {});
  byPage.people = await editControls();
  await shot('viewer-people');
  const someone = await page.getAttribute('tr[data-user]', 'data-user').catch(() => null);
  if (someone) {
    await page.evaluate((id) => { window.location.hash = `#people/${encodeURIComponent(id)}`; }, someone);
    await settled('person');
    byPage.person = await editControls();
    await shot('viewer-person');
  }
  await go('budgets');
  byPage.budgets = await editControls();
  await go('limits');
  byPage.limits = await editControls();
  badge = badge || (await visible('.readonly-badge'));
  await shot('viewer-limits');
  const total = Object.values(byPage).reduce((a, b) => a + b, 0);
  return { role, edit_controls_enabled: total, edit_controls_by_page: byPage, readonly_badge: badge };
}

async function refused() {
  const r = await signIn();
  await shot('refused');
  const text = await page.evaluate(() => (document.body ? document.body.innerText : '')).catch(() => '');
  return {
    role: r === 'in' ? await textOf('#role') : null,
    signed_in: r === 'in',
    final_url: page.url(),
    status: lastNav ? lastNav.status : null,
    text: String(text).slice(0, 2000),
  };
}

async function revoke() {
  const user = env.REVOKE_USER;
  if (!user) throw new Failure('REVOKE_USER must be set for revoke');
  if ((await signIn()) !== 'in') throw new Failure(`the gateway refused the sign-in (HTTP ${lastNav?.status})`);
  const role = await textOf('#role');
  await page.evaluate((id) => { window.location.hash = `#people/${encodeURIComponent(id)}`; }, user);
  await settled('person');
  await page.waitForSelector('#revoke-sessions', { timeout: stepTimeout() });
  await page.click('#revoke-sessions', { timeout: stepTimeout() });
  await page.waitForSelector('#confirm', { timeout: stepTimeout() });
  await shot('revoke-dialog');
  await page.click('#confirm', { timeout: stepTimeout() });
  const n = await waitNotice();
  await page.waitForSelector('[data-testid="confirm-dialog"]', { state: 'detached', timeout: 5000 }).catch(() => {});
  await sleep(300);
  await shot('revoke-done');
  return { role, user, ...n, revoked_before: await textOf('[data-testid="revoked-before"]') };
}

function consoleCookie(cookies) {
  const c = cookies.find((x) => x.name === '__Host-gh_console') ?? cookies.find((x) => x.name === 'gh_console');
  return c ? { name: c.name, value: c.value } : null;
}

async function signout() {
  if ((await signIn()) !== 'in') throw new Failure(`the gateway refused the sign-in (HTTP ${lastNav?.status})`);
  const role = await textOf('#role');
  const cookie = consoleCookie(await context.cookies());
  if (!cookie) throw new Failure('no console session cookie (__Host-gh_console / gh_console) in the browser');
  await page.click('#signout', { timeout: stepTimeout() });
  await page.waitForSelector('#signin', { state: 'visible', timeout: stepTimeout() });
  await shot('signed-out');
  return { role, cookie, signin_shown: await visible('#signin'), cookie_after: consoleCookie(await context.cookies()) };
}

async function main() {
  if (!CONSOLE_URL) throw new Failure('CONSOLE_URL is not set');
  if (SCREENSHOT_DIR) fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  browser = await launchChromium(stepTimeout());
  context = await browser.newContext({
    viewport: { width: 1280, height: 900 },
    acceptDownloads: true,
    ignoreHTTPSErrors: env.IGNORE_HTTPS_ERRORS === '1',
  });
  // Any write to window.__xss, in any document, is reported here (a binding is outside
  // the page's CSP); so are CSP violations.
  await context.exposeBinding('__consoleTestReport', (_src, kind, detail) => {
    if (kind === 'xss') xssFired = true;
    if (kind === 'csp' && cspViolations.length < 50) cspViolations.push(detail);
  });
  await context.addInitScript(() => {
    let value;
    Object.defineProperty(window, '__xss', {
      configurable: true,
      get: () => value,
      set: (v) => {
        value = v;
        window.__xssSeen = true;
        try { window.__consoleTestReport('xss', String(v)); } catch { /* binding gone */ }
      },
    });
    document.addEventListener('securitypolicyviolation', (e) => {
      try { window.__consoleTestReport('csp', `${e.violatedDirective} ${e.blockedURI}`); } catch { /* ignore */ }
    });
  });
  page = await context.newPage();
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) pages.push(f.url());
  });
  page.on('response', (r) => {
    try {
      if (r.request().isNavigationRequest() && r.frame() === page.mainFrame()) lastNav = { url: r.url(), status: r.status() };
    } catch { /* detached */ }
  });
  page.on('console', (m) => {
    if (m.type() === 'error' && consoleErrors.length < 50) consoleErrors.push(m.text().slice(0, 500));
  });
  page.on('pageerror', (e) => {
    if (consoleErrors.length < 50) consoleErrors.push(`pageerror: ${String(e.message).slice(0, 500)}`);
  });

  let out;
  if (SCENARIO === 'admin_tour') out = await adminTour();
  else if (SCENARIO === 'viewer') out = await viewer();
  else if (SCENARIO === 'refused') out = await refused();
  else if (SCENARIO === 'revoke') out = await revoke();
  else if (SCENARIO === 'signout') out = await signout();
  else throw new Failure(`unknown SCENARIO ${JSON.stringify(SCENARIO)}`);
  const sec = await security().catch(() => ({ xss_fired: xssFired, onerror_elements: null, title: null }));
  return {
    ok: true,
    scenario: SCENARIO,
    ...out,
    ...sec,
    pages,
    screenshots,
    console_errors: consoleErrors,
    csp_violations: cspViolations,
  };
}

const timer = setTimeout(() => {
  fail(`overall timeout of ${TIMEOUT_MS / 1000} s`);
}, WORK_MS);

try {
  const out = await main();
  if (!finished) {
    finished = true;
    clearTimeout(timer);
    emit(out);
    await closeBrowser();
    process.exit(0);
  }
} catch (err) {
  clearTimeout(timer);
  await fail(err instanceof Failure ? err.message : `${err?.name || 'Error'}: ${err?.message || err}`);
}
