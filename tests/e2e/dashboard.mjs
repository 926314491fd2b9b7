// The Gatehouse dashboard in a real browser: Debian's Chromium (/usr/bin/chromium)
// driven by npm `playwright-core`. No browser is ever downloaded.
//
// Environment:
//   BASE_URL       required; the gateway, e.g. http://127.0.0.1:PORT
//   SCREENSHOT_DIR optional; writes dashboard.png, policy-blocks.png and upstreams.png there
//   CHROMIUM       optional; browser executable (default /usr/bin/chromium)
//   TIMEOUT_SECS   optional; overall timeout (default 60)
//   APP_TOKEN      optional; instead of the read-only flow below, open the page as the
//                  desktop does (/#token=...) and drive the Login and Settings tabs against
//                  the app API; prints {"phase":"app", ...} (screenshots login.png,
//                  settings.png)
//   PROMPT_CACHE   optional; instead of the flow below, open the Dashboard once a cache
//                  break is in the snapshot, read its Prompt cache section and print
//                  {"phase":"prompt_cache", tallies, breaks, ...} (screenshot
//                  dashboard-prompt-cache.png: that section only)
//
// Protocol (stdout: one JSON line per phase; stdin: one line to go on):
//   1. open BASE_URL, wait for the totals and the live event stream, read the Dashboard,
//      then the Policy blocks tab; print {"phase":"first", dashboard, blocks, tabs, ...}
//   2. wait for a line on stdin (the test sends one more request through the gateway),
//      then wait until the Dashboard shows a different request count for today and
//      print {"phase":"second", dashboard, console_errors, csp_violations}.
//   Any failure: {"error", "url"} and exit 1.

import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { launchChromium } from './chromium.mjs';

const env = process.env;
const BASE_URL = env.BASE_URL;
const SCREENSHOT_DIR = env.SCREENSHOT_DIR || '';
const TIMEOUT_MS = (Number.parseFloat(env.TIMEOUT_SECS || '') || 60) * 1000;
const STEP_MS = 20_000;
const started = Date.now();
const stepTimeout = () => Math.max(1, Math.min(STEP_MS, TIMEOUT_MS - 3000 - (Date.now() - started)));

let browser;
let page;
const consoleErrors = [];

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

async function closeBrowser() {
  if (!browser) return;
  const b = browser;
  browser = undefined;
  await Promise.race([b.close().catch(() => {}), new Promise((r) => { setTimeout(r, 2000).unref(); })]);
}

async function fail(message) {
  let url = '';
  try { url = page ? page.url() : ''; } catch { /* closed */ }
  emit({ error: String(message).replace(/\x1b\[[0-9;]*m/g, ''), url, console_errors: consoleErrors });
  await closeBrowser();
  process.exit(1);
}

const byTestId = (id) => `[data-testid="${id}"]`;

async function text(id) {
  const el = await page.$(byTestId(id));
  return el ? ((await el.textContent()) || '').trim() : null;
}

async function shot(name) {
  if (!SCREENSHOT_DIR) return;
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, name), fullPage: true, timeout: 10_000 });
}

async function readDashboard() {
  const totals = {};
  for (const id of ['today', 'week', 'month']) {
    totals[id] = {
      cost: await text(`total-${id}-cost`),
      requests: await text(`total-${id}-requests`),
      input: await text(`total-${id}-input`),
      output: await text(`total-${id}-output`),
    };
  }
  const meters = {};
  for (const p of ['daily', 'weekly', 'monthly']) {
    if (!(await page.$(byTestId(`meter-${p}`)))) continue;
    const bar = await page.$(byTestId(`meter-${p}-bar`));
    meters[p] = {
      spent: await text(`meter-${p}-spent`),
      limit: await text(`meter-${p}-limit`),
      percent: await text(`meter-${p}-percent`),
      aria_valuenow: bar ? await bar.getAttribute('aria-valuenow') : null,
      role: bar ? await bar.getAttribute('role') : null,
    };
  }
  const models = await page.$$eval('[data-testid="model-row"]', (rows) =>
    rows.map((r) => ({
      model: r.querySelector('td')?.textContent?.trim() ?? '',
      cost: r.querySelector('[data-testid="model-cost"]')?.textContent?.trim() ?? '',
    })));
  const recent = await page.$$eval('[data-testid="recent-row"]', (rows) =>
    rows.map((r) => ({
      cells: [...r.querySelectorAll('td')].map((c) => c.textContent.trim()),
      cost: r.querySelector('[data-testid="recent-cost"]')?.textContent?.trim() ?? '',
    })));
  return { totals, meters, models, recent, prompt_cache: await readPromptCache(), read_only: await text('read-only') };
}

// The Prompt cache section: a row per upstream and model, then the recent cache breaks.
async function readPromptCache() {
  const tallies = await page.$$eval('[data-testid="prompt-cache-row"]', (rows) =>
    rows.map((r) => {
      const get = (id) => r.querySelector(`[data-testid="${id}"]`)?.textContent?.trim() ?? '';
      return {
        upstream: r.getAttribute('data-upstream'),
        model: r.getAttribute('data-model'),
        turns: get('cache-turns'),
        read: get('cache-read'),
        write: get('cache-write'),
        uncached: get('cache-uncached'),
        ratio: get('cache-ratio'),
        breaks: get('cache-breaks'),
      };
    }));
  const breaks = await page.$$eval('[data-testid="cache-break-row"]', (rows) =>
    rows.map((r) => {
      const get = (id) => r.querySelector(`[data-testid="${id}"]`)?.textContent?.trim() ?? '';
      return {
        cause: r.getAttribute('data-cause'),
        session: get('cache-break-session'),
        session_title: r.querySelector('[data-testid="cache-break-session"]')?.getAttribute('title') ?? '',
        model: get('cache-break-model'),
        upstream: get('cache-break-upstream'),
        label: get('cache-break-cause'),
        explanation: get('cache-break-explanation'),
      };
    }));
  const heading = await page.$('#h-prompt-cache');
  return {
    heading: heading ? ((await heading.textContent()) || '').trim() : null,
    tallies,
    breaks,
    empty: await text('no-cache-breaks'),
    no_detail: await text('cache-breaks-no-detail'),
  };
}

// The desktop's way in: the token arrives in the fragment and must leave the address bar.
async function appFlow(token) {
  const resp = await page.goto(`${BASE_URL}/#token=${encodeURIComponent(token)}`, { waitUntil: 'domcontentloaded', timeout: stepTimeout() });
  if (!resp || resp.status() !== 200) throw new Error(`GET / answered ${resp ? resp.status() : 'nothing'}`);
  await page.waitForSelector(byTestId('app-mode'), { timeout: stepTimeout() });
  const url_after = page.url();
  const stored = await page.evaluate(() => sessionStorage.getItem('gatehouse.app-token'));
  const tabs = await page.$$eval('[role="tab"]', (els) => els.map((e) => e.getAttribute('data-testid')));
  const keychain_banner = await text('keychain-banner');

  await page.click(byTestId('tab-login'), { timeout: stepTimeout() });
  await page.waitForSelector(byTestId('user-code'), { timeout: stepTimeout() });
  const login = {
    state: await text('login-state'),
    user_code: await text('user-code'),
    expiry: await text('code-expiry'),
    notice: await text('login-notice'),
  };
  await shot('login.png');
  await page.click(byTestId('open-verification'), { timeout: stepTimeout() });

  await page.click(byTestId('tab-settings'), { timeout: stepTimeout() });
  await page.waitForSelector(byTestId('mode-field'), { timeout: stepTimeout() });
  const settings = {
    locks: (await page.$$(byTestId('lock'))).length,
    mode_disabled: await page.$eval(byTestId('mode-field'), (f) => f.disabled),
    url_disabled: await page.$eval(byTestId('central-url'), (i) => i.disabled),
    url_value: await page.$eval(byTestId('central-url'), (i) => i.value),
    claude_code: await text('claude-code-status'),
  };
  await shot('settings.png');
  await page.click(byTestId('claude-code-configure'), { timeout: stepTimeout() });
  await page.waitForSelector(`${byTestId('claude-code-status')}:text("Configured")`, { timeout: stepTimeout() });
  await page.click(byTestId('pause-toggle'), { timeout: stepTimeout() });
  await page.waitForSelector(byTestId('paused'), { timeout: stepTimeout() });
  const csp_violations = await page.evaluate(() => window.__csp);
  emit({ phase: 'app', url_after, stored, tabs, keychain_banner, login, settings, console_errors: consoleErrors, csp_violations });
}

// The Prompt cache section once the gateway has seen a cache break (the test made one).
async function promptCacheFlow() {
  const resp = await page.goto(`${BASE_URL}/`, { waitUntil: 'domcontentloaded', timeout: stepTimeout() });
  if (!resp || resp.status() !== 200) throw new Error(`GET / answered ${resp ? resp.status() : 'nothing'}`);
  await page.waitForSelector('.dot.on', { timeout: stepTimeout() });
  await page.waitForSelector(byTestId('cache-break-row'), { timeout: stepTimeout() });
  const prompt_cache = await readPromptCache();
  if (SCREENSHOT_DIR) {
    // The section alone, with a margin of the page around it.
    const box = await (await page.$(byTestId('prompt-cache'))).boundingBox();
    const pad = 20;
    const scroll = await page.evaluate(() => ({ x: window.scrollX, y: window.scrollY }));
    await page.screenshot({
      path: path.join(SCREENSHOT_DIR, 'dashboard-prompt-cache.png'),
      fullPage: true,
      clip: {
        x: Math.max(0, box.x + scroll.x - pad),
        y: Math.max(0, box.y + scroll.y - pad),
        width: box.width + 2 * pad,
        height: box.height + 2 * pad,
      },
      timeout: 10_000,
    });
  }
  const csp_violations = await page.evaluate(() => window.__csp);
  emit({ phase: 'prompt_cache', prompt_cache, console_errors: consoleErrors, csp_violations });
}

async function main() {
  if (!BASE_URL) throw new Error('BASE_URL is not set');
  if (SCREENSHOT_DIR) fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  browser = await launchChromium(stepTimeout());
  const context = await browser.newContext({ viewport: { width: 1200, height: 820 }, colorScheme: 'light' });
  // Record CSP violations from the first byte on (init scripts are not subject to the CSP).
  await context.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(e.message));

  if (env.APP_TOKEN) {
    await appFlow(env.APP_TOKEN);
    return;
  }
  if (env.PROMPT_CACHE) {
    await promptCacheFlow();
    return;
  }
  const resp = await page.goto(`${BASE_URL}/`, { waitUntil: 'domcontentloaded', timeout: stepTimeout() });
  if (!resp || resp.status() !== 200) throw new Error(`GET / answered ${resp ? resp.status() : 'nothing'}`);
  const csp = resp.headers()['content-security-policy'] || '';
  await page.waitForSelector(byTestId('total-today-cost'), { timeout: stepTimeout() });
  // The live dot turns on once the event stream is open.
  await page.waitForSelector('.dot.on', { timeout: stepTimeout() });
  const tabs = await page.$$eval('[role="tab"]', (els) => els.map((e) => e.getAttribute('data-testid')));
  const dashboard = await readDashboard();
  await shot('dashboard.png');

  await page.click(byTestId('tab-blocks'), { timeout: stepTimeout() });
  await page.waitForSelector(byTestId('block-row'), { timeout: stepTimeout() });
  const blocks = await page.$$eval('[data-testid="block-row"]', (rows) =>
    rows.map((r) => ({
      layer: r.getAttribute('data-layer'),
      label: r.querySelector('[data-testid="block-layer"]')?.textContent?.trim() ?? '',
      model: r.querySelector('[data-testid="block-model"]')?.textContent?.trim() ?? '',
      message: r.querySelector('[data-testid="block-message"]')?.textContent?.trim() ?? '',
    })));
  await shot('policy-blocks.png');
  await page.click(byTestId('tab-upstreams'), { timeout: stepTimeout() });
  await page.waitForSelector(byTestId('upstream-row'), { timeout: stepTimeout() });
  const upstreams = await page.$$eval('[data-testid="upstream-row"]', (rows) =>
    rows.map((r) => ({
      name: r.getAttribute('data-name'),
      state: r.querySelector('[data-testid="upstream-state"]')?.textContent?.trim() ?? '',
      breaker: r.querySelector('[data-testid="upstream-breaker"]')?.textContent?.trim() ?? '',
      ttfb: r.querySelector('[data-testid="upstream-ttfb"]')?.textContent?.trim() ?? '',
      errors: r.querySelector('[data-testid="upstream-errors"]')?.textContent?.trim() ?? '',
    })));
  const transitions = await page.$$eval('[data-testid="upstream-transitions"] li', (els) =>
    els.map((e) => e.textContent.trim()));
  await shot('upstreams.png');
  await page.click(byTestId('tab-dashboard'), { timeout: stepTimeout() });
  await page.waitForSelector(byTestId('total-today-requests'), { timeout: stepTimeout() });
  emit({ phase: 'first', csp, tabs, dashboard, blocks, upstreams, transitions });

  // 2. The test sends one more request; the page must show it without a reload.
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('no go-ahead on stdin')), stepTimeout());
    t.unref();
    rl.once('line', () => { clearTimeout(t); resolve(); });
  });
  rl.close();
  const before = dashboard.totals.today.requests;
  await page.waitForFunction(
    ([sel, old]) => {
      const el = document.querySelector(sel);
      return el && el.textContent.trim() !== old;
    },
    [byTestId('total-today-requests'), before],
    { timeout: stepTimeout() },
  );
  const after = await readDashboard();
  const csp_violations = await page.evaluate(() => window.__csp);
  emit({ phase: 'second', dashboard: after, console_errors: consoleErrors, csp_violations });
}

const deadline = setTimeout(() => { void fail(`timed out after ${TIMEOUT_MS} ms`); }, TIMEOUT_MS);
deadline.unref();
try {
  await main();
  await closeBrowser();
  clearTimeout(deadline);
  process.exit(0);
} catch (err) {
  await fail(err && err.message ? err.message : err);
}
