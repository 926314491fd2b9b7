// The desktop app's Login view in a real browser (Debian's Chromium via playwright-core),
// against the real app API during a real device flow with a central Gatehouse.
//
// Environment:
//   APP_URL         required; the dashboard as the tray opens it (http://127.0.0.1:P/#token=...)
//   SCREENSHOT_DIR  optional; writes login-pending.png and login-signed-in.png there
//   CHROMIUM        optional; browser executable (default /usr/bin/chromium)
//
// Protocol (stdout: one JSON line per phase; stdin: one line to go on):
//   1. open APP_URL; the page must show the Login tab by itself (a sign-in is pending);
//      read the user code, click "open the sign-in page"; print {"phase":"pending", ...}
//   2. wait for a line on stdin (the test signs in in another browser), then wait until
//      the Login view says signed in; print {"phase":"signed_in", user, groups, ...}
//   Any failure: {"error"} and exit 1.

import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { launchChromium } from './chromium.mjs';

const env = process.env;
const STEP_MS = 30_000;
const byTestId = (id) => `[data-testid="${id}"]`;
let browser;
const consoleErrors = [];

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

async function shot(page, name) {
  if (!env.SCREENSHOT_DIR) return;
  fs.mkdirSync(env.SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(env.SCREENSHOT_DIR, name) });
}

async function main() {
  if (!env.APP_URL) throw new Error('APP_URL is not set');
  browser = await launchChromium(STEP_MS);
  const context = await browser.newContext({ viewport: { width: 1200, height: 820 }, colorScheme: 'light' });
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(e.message));
  await page.goto(env.APP_URL, { timeout: STEP_MS });
  const code = await page.waitForSelector(byTestId('user-code'), { timeout: STEP_MS });
  const user_code = (await code.textContent()).trim();
  const selected = await page.getAttribute(byTestId('tab-login'), 'aria-selected');
  const notice = await page.textContent(byTestId('login-notice')).catch(() => null);
  await shot(page, 'login-pending.png');
  // The click posts to the app API; wait for its answer so the app has acted on it.
  const [opened] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/gatehouse/app/open'), { timeout: STEP_MS }),
    page.click(byTestId('open-verification')),
  ]);
  if (opened.status() !== 200) throw new Error(`open answered ${opened.status()}`);
  emit({ phase: 'pending', user_code, login_tab_selected: selected, notice, url_after: page.url() });

  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once('line', resolve));
  rl.close();
  await page.waitForSelector(`${byTestId('login-state')}[data-state="signed_in"]`, { timeout: STEP_MS });
  const user = (await page.textContent(byTestId('login-user'))).trim();
  const groups = (await page.textContent(byTestId('login-groups'))).trim();
  await shot(page, 'login-signed-in.png');
  await page.click(byTestId('tab-dashboard'));
  await page.waitForTimeout(300);
  await shot(page, 'dashboard-connected.png');
  emit({ phase: 'signed_in', user, groups, console_errors: consoleErrors });
  await browser.close();
}

main().catch(async (e) => {
  emit({ error: String(e && e.message ? e.message : e).replace(/\x1b\[[0-9;]*m/g, ''), console_errors: consoleErrors });
  if (browser) await browser.close().catch(() => {});
  process.exit(1);
});
