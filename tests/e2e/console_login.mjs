// Signs in to the team console in a real browser (Debian's Chromium through
// playwright-core) and reports the cookies the gateway set, so the Rust tests can drive
// the admin API as that browser would.
//
// Environment:
//   CONSOLE_URL   required; the console, e.g. http://127.0.0.1:PORT/console
//   LOGIN         IdP account name; PASSWORD its password
//   TIMEOUT_SECS  optional; overall timeout (default 60)
//
// Flow: GET CONSOLE_URL/login (the gateway answers 303 to the IdP), fill #login and
// #password, #signin, #allow on a consent page, until the browser is back on the gateway:
// either on /console (signed in) or on the gateway's refusal page (#result).
//
// Stdout: exactly one JSON line, exit 0:
//   {"final_url", "status" (of the last document), "text" (its visible text, 500 chars),
//    "cookies": [{"name", "value", "httpOnly", "sameSite", "secure", "path"}]}
// or {"error", "url"} and exit 1.

import { launchChromium } from './chromium.mjs';

const env = process.env;
const TIMEOUT_MS = (Number.parseFloat(env.TIMEOUT_SECS || '') || 60) * 1000;
const started = Date.now();
const left = () => Math.max(1000, TIMEOUT_MS - 3000 - (Date.now() - started));

let browser;
let page;

async function main() {
  const base = env.CONSOLE_URL;
  if (!base || !env.LOGIN) throw new Error('CONSOLE_URL and LOGIN must be set');
  const origin = new URL(base).origin;
  browser = await launchChromium(left());
  const context = await browser.newContext({ viewport: { width: 1000, height: 700 } });
  page = await context.newPage();
  let last = await page.goto(`${base}/login`, { waitUntil: 'domcontentloaded', timeout: left() });
  page.on('response', (r) => {
    if (r.request().isNavigationRequest() && r.request().frame() === page.mainFrame()) last = r;
  });
  for (let step = 0; step < 8; step += 1) {
    const url = new URL(page.url());
    if (url.origin === origin && (url.pathname === '/console' || (await page.$('#result')))) break;
    await page.waitForSelector('#login, #allow, #result, #idp-error', { state: 'attached', timeout: left() });
    if (await page.$('#idp-error')) throw new Error(`IdP error page: ${await page.textContent('body')}`);
    if (await page.$('#login')) {
      await page.fill('#login', env.LOGIN);
      await page.fill('#password', env.PASSWORD ?? '');
      await Promise.all([page.waitForNavigation({ timeout: left() }), page.click('#signin')]);
    } else if (await page.$('#allow')) {
      await Promise.all([page.waitForNavigation({ timeout: left() }), page.click('#allow')]);
    }
    await page.waitForLoadState('domcontentloaded', { timeout: left() });
  }
  const cookies = (await context.cookies(origin)).map((c) => ({
    name: c.name, value: c.value, httpOnly: c.httpOnly, sameSite: c.sameSite, secure: c.secure, path: c.path,
  }));
  const text = ((await page.textContent('body').catch(() => '')) || '').replace(/\s+/g, ' ').trim();
  return { final_url: page.url(), status: last ? last.status() : null, text: text.slice(0, 500), cookies };
}

const timer = setTimeout(() => {
  process.stdout.write(`${JSON.stringify({ error: 'timeout', url: page ? page.url() : '' })}\n`);
  process.exit(1);
}, TIMEOUT_MS);
try {
  const out = await main();
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exitCode = 0;
} catch (e) {
  process.stdout.write(`${JSON.stringify({ error: String(e.message || e).replace(/\x1b\[[0-9;]*m/g, ''), url: page ? page.url() : '' })}\n`);
  process.exitCode = 1;
} finally {
  clearTimeout(timer);
  await browser?.close().catch(() => {});
}
