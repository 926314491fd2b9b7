// The desktop window's Get started, Projects, Sessions, charts and export in a real
// browser: Debian's Chromium (/usr/bin/chromium) driven by npm `playwright-core`, clicking
// and typing as a person would. Driven by tests/tests/integration/desktop_insight_browser.rs.
//
// Environment:
//   APP_URL        required; the window as the tray opens it (http://127.0.0.1:P/#token=...)
//   MODE           required; `setup` (a fresh install) or `insight` (usage already there)
//   API_KEY        setup: the Anthropic key typed into Get started
//   SESSION_ID     insight: the session to open (its detail has a main and a subagent row)
//   SCREENSHOT_DIR optional; where the PNGs go
//   CHROMIUM       optional; browser executable (default /usr/bin/chromium)
//   TIMEOUT_SECS   optional; overall timeout (default 90)
//
// Protocol (stdout: one JSON line per phase; stdin: one line to go on):
//   setup:
//     1. open APP_URL (Get started comes first: get-started.png), choose My own provider,
//        Anthropic, type the key, add it, press Test until it works, read what configuring
//        Claude Code will change, tick the status line, Configure; print
//        {"phase":"configured", ...} once step 3 waits for the first request.
//     2. wait for a line on stdin (the test sends a request as Claude Code), wait until
//        step 3 says it arrived (get-started-done.png); print {"phase":"arrived", ...}.
//   insight: Projects (projects.png), Sessions (sessions.png) with its export downloaded
//     (CSV, every request), the session SESSION_ID (session-detail.png), the Dashboard's
//     charts (dashboard-charts.png); print {"phase":"insight", ...}.
//   Every phase also carries console_errors and csp_violations. Any failure: {"error",
//   "url", "console_errors"} and exit 1.

import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { launchChromium } from './chromium.mjs';

const env = process.env;
const SCREENSHOT_DIR = env.SCREENSHOT_DIR || '';
const TIMEOUT_MS = (Number.parseFloat(env.TIMEOUT_SECS || '') || 90) * 1000;
const STEP_MS = 20_000;
const started = Date.now();
/** One wait's bound: a step's, and never past the overall deadline. */
const stepTimeout = () => Math.max(1, Math.min(STEP_MS, TIMEOUT_MS - 3000 - (Date.now() - started)));

let browser;
let page;
const consoleErrors = [];

const byTestId = (id) => `[data-testid="${id}"]`;

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

async function shot(name) {
  if (!SCREENSHOT_DIR) return;
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, name), fullPage: true, timeout: 10_000 });
}

async function text(selector) {
  const el = await page.$(selector);
  return el ? ((await el.textContent()) || '').trim() : null;
}

const attr = (selector, name) => page.getAttribute(selector, name, { timeout: stepTimeout() });

/** Waits until `selector` has `data-state="state"`. */
const waitState = (selector, state) =>
  page.waitForSelector(`${selector}[data-state="${state}"]`, { timeout: stepTimeout() });

/** What the page saw go wrong: console errors and CSP violations. */
async function problems() {
  return { console_errors: consoleErrors, csp_violations: await page.evaluate(() => window.__csp) };
}

/** Waits (bounded) for a line on stdin: the test's go-ahead. */
async function goAhead() {
  const rl = readline.createInterface({ input: process.stdin });
  try {
    await new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no go-ahead on stdin')), stepTimeout());
      t.unref();
      rl.once('line', () => { clearTimeout(t); resolve(); });
    });
  } finally {
    rl.close();
  }
}

async function stepStates() {
  const out = {};
  for (const n of [1, 2, 3]) out[n] = await attr(byTestId(`setup-step-${n}`), 'data-state');
  return out;
}

/** The changes Get started says configuring Claude Code will make. */
async function previewChanges() {
  await page.waitForSelector(byTestId('claude-code-preview'), { timeout: stepTimeout() });
  return page.$$eval(`${byTestId('claude-code-preview')} li`, (items) =>
    items.map((li) => ({
      key: li.getAttribute('data-key'),
      from: li.querySelector('.change-from')?.textContent?.trim() ?? '',
      to: li.querySelector('.change-to')?.textContent?.trim() ?? '',
    })));
}

/** Presses step 1's Test until the provider answers (the gateway may still be restarting
 *  with it, which the result says), within the step's bound. */
async function testProvider() {
  const until = Date.now() + stepTimeout();
  let result = '';
  let presses = 0;
  while (!result.startsWith('works') && Date.now() < until) {
    presses += 1;
    await Promise.all([
      page.waitForResponse((r) => r.url().includes('/gatehouse/app/providers/') && r.url().endsWith('/test'), {
        timeout: stepTimeout(),
      }),
      page.click(byTestId('setup-test-provider'), { timeout: stepTimeout() }),
    ]);
    result = (await text(byTestId('setup-test-result'))) ?? '';
    if (!result.startsWith('works')) await page.waitForTimeout(300);
  }
  return { result, presses };
}

async function setupFlow() {
  if (!env.API_KEY) throw new Error('API_KEY is not set');
  await page.goto(env.APP_URL, { waitUntil: 'domcontentloaded', timeout: stepTimeout() });
  // A fresh install opens on Get started by itself.
  await page.waitForSelector(`${byTestId('tab-setup')}[aria-selected="true"]`, { timeout: stepTimeout() });
  await waitState(byTestId('setup-step-1'), 'current');
  const opened = { tab: await attr('[role="tab"][aria-selected="true"]', 'data-testid'), steps: await stepStates() };
  await shot('get-started.png');

  // Step 1: my own provider, Anthropic, the key.
  await page.check(byTestId('setup-source-own'), { timeout: stepTimeout() });
  await page.selectOption(byTestId('setup-provider-kind'), 'anthropic', { timeout: stepTimeout() });
  await page.fill(byTestId('api-key'), env.API_KEY, { timeout: stepTimeout() });
  await page.click(`${byTestId('provider-picker')} button[type="submit"]`, { timeout: stepTimeout() });
  await waitState(byTestId('setup-step-1'), 'done');
  const test = await testProvider();
  const summary = await text(byTestId('setup-source-summary'));

  // Step 2: see what will change, ask for the status line too, configure.
  await waitState(byTestId('setup-step-2'), 'current');
  const preview = await previewChanges();
  await page.check(byTestId('setup-statusline'), { timeout: stepTimeout() });
  const previewWithStatusline = await previewChanges();
  await page.click(byTestId('setup-claude-code-configure'), { timeout: stepTimeout() });
  await waitState(byTestId('setup-step-2'), 'done');

  // Step 3 waits for Claude Code's first request.
  await waitState(byTestId('setup-step-3'), 'current');
  await waitState(byTestId('setup-first-request'), 'waiting');
  emit({
    phase: 'configured',
    opened,
    test,
    summary,
    preview,
    preview_with_statusline: previewWithStatusline,
    steps: await stepStates(),
    first_request: await attr(byTestId('setup-first-request'), 'data-state'),
    ...(await problems()),
  });

  await goAhead();
  await waitState(byTestId('setup-first-request'), 'arrived');
  await waitState(byTestId('setup-step-3'), 'done');
  const arrived = {
    model: await text(byTestId('setup-first-request-model')),
    cost: await text(byTestId('setup-first-request-cost')),
    line: await text(byTestId('setup-first-request')),
  };
  const done = await text(byTestId('setup-done'));
  await shot('get-started-done.png');
  emit({ phase: 'arrived', arrived, done, steps: await stepStates(), ...(await problems()) });
}

async function openTab(id, ready) {
  await page.click(byTestId(`tab-${id}`), { timeout: stepTimeout() });
  await page.waitForSelector(ready, { timeout: stepTimeout() });
}

async function readProjects() {
  return page.$$eval(byTestId('project-row'), (rows) =>
    rows.map((r) => {
      const cell = (id) => r.querySelector(`[data-testid="${id}"]`)?.textContent?.trim() ?? '';
      return {
        key: r.getAttribute('data-key'),
        name: cell('project-name'),
        today: cell('project-cost-today'),
        month: cell('project-cost-month'),
        sessions: cell('project-sessions'),
      };
    }));
}

async function readSessions() {
  return page.$$eval(byTestId('session-row'), (rows) =>
    rows.map((r) => {
      const cell = (id) => r.querySelector(`[data-testid="${id}"]`)?.textContent?.trim() ?? '';
      return {
        id: r.getAttribute('data-session-id'),
        project: cell('session-project'),
        cost: cell('session-cost'),
        subagent_cost: cell('session-subagent-cost'),
        requests: cell('session-requests'),
        models: cell('session-models'),
      };
    }));
}

/** Sessions' export: CSV, every request; the file the browser saves. */
async function exportCsv() {
  await page.selectOption(byTestId('export-format'), 'csv', { timeout: stepTimeout() });
  await page.selectOption(byTestId('export-group'), 'raw', { timeout: stepTimeout() });
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: stepTimeout() }),
    page.click(byTestId('export-button'), { timeout: stepTimeout() }),
  ]);
  const file = await download.path();
  const said = await page.waitForSelector(byTestId('export-done'), { timeout: stepTimeout() });
  return {
    filename: download.suggestedFilename(),
    text: fs.readFileSync(file, 'utf8'),
    said: ((await said.textContent()) || '').trim(),
  };
}

async function insightFlow() {
  const sid = env.SESSION_ID;
  if (!sid) throw new Error('SESSION_ID is not set');
  await page.goto(env.APP_URL, { waitUntil: 'domcontentloaded', timeout: stepTimeout() });
  await page.waitForSelector(byTestId('app-mode'), { timeout: stepTimeout() });
  const opened_on = await attr('[role="tab"][aria-selected="true"]', 'data-testid');

  await openTab('projects', byTestId('project-row'));
  const projects = await readProjects();
  const projects_count = await text(byTestId('projects-count'));
  await shot('projects.png');

  await openTab('sessions', byTestId('session-row'));
  const sessions = await readSessions();
  const sessions_count = await text(byTestId('sessions-count'));
  await shot('sessions.png');
  const exported = await exportCsv();

  await page.click(`${byTestId('session-row')}[data-session-id="${sid}"]`, { timeout: stepTimeout() });
  await page.waitForSelector(`${byTestId('session-detail')}[data-session-id="${sid}"] ${byTestId('agent-row')}`, {
    timeout: stepTimeout(),
  });
  const detail = {
    id: await text(byTestId('session-detail-id')),
    requests: await text(byTestId('session-detail-requests')),
    cost: await text(byTestId('session-detail-cost')),
    agents: await page.$$eval(byTestId('agent-row'), (rows) =>
      rows.map((r) => ({
        kind: r.getAttribute('data-kind'),
        agent_id: r.getAttribute('data-agent-id'),
        requests: r.querySelector('[data-testid="agent-requests"]')?.textContent?.trim() ?? '',
        cost: r.querySelector('[data-testid="agent-cost"]')?.textContent?.trim() ?? '',
      }))),
    request_classes: await page.$$eval(byTestId('request-row'), (rows) => rows.map((r) => r.getAttribute('data-class'))),
  };
  await shot('session-detail.png');

  await openTab('dashboard', byTestId('chart-spend'));
  // The charts draw on canvas once their data is in.
  await page.waitForSelector(`${byTestId('chart-spend')} canvas`, { timeout: stepTimeout() });
  const chart = async (id) => ({
    present: (await page.$(byTestId(id))) !== null,
    canvas: (await page.$(`${byTestId(id)} canvas`)) !== null,
    empty: (await page.$(byTestId(`${id}-empty`))) !== null,
  });
  const charts = {
    spend: { ...(await chart('chart-spend')), total: await text(byTestId('chart-spend-total')) },
    hourly: { ...(await chart('chart-hourly')), total: await text(byTestId('chart-hourly-total')) },
    cache: await chart('chart-cache'),
  };
  await shot('dashboard-charts.png');
  emit({
    phase: 'insight',
    opened_on,
    projects,
    projects_count,
    sessions,
    sessions_count,
    export: exported,
    detail,
    charts,
    ...(await problems()),
  });
}

async function main() {
  if (!env.APP_URL) throw new Error('APP_URL is not set');
  if (SCREENSHOT_DIR) fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  browser = await launchChromium(stepTimeout());
  const context = await browser.newContext({
    viewport: { width: 1200, height: 820 },
    colorScheme: 'light',
    acceptDownloads: true,
  });
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
  if (env.MODE === 'setup') await setupFlow();
  else if (env.MODE === 'insight') await insightFlow();
  else throw new Error(`MODE must be setup or insight, not ${env.MODE}`);
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
