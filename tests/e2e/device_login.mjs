// The person's half of Gatehouse's RFC 8628 device sign-in, done in a real
// browser: Debian's Chromium (/usr/bin/chromium) driven by npm `playwright-core`.
// No browser is ever downloaded.
//
// Environment:
//   START_URL      required; the gateway's verification_uri_complete,
//                  e.g. http://127.0.0.1:PORT/device?user_code=WDJB-MJHT
//   LOGIN          IdP account name (required unless SUBMIT=no)
//   PASSWORD       its password (required unless SUBMIT=no)
//   EXPECT_CODE    optional; fail unless #user_code is pre-filled with exactly this
//   SUBMIT         optional; "no" = only open START_URL, report, and stop
//   CONSENT        optional; "deny" = click #deny instead of #allow on a consent page
//   SCREENSHOT_DIR optional; a PNG of every page reached (NN-step.png, error.png)
//   CHROMIUM       optional; browser executable (default /usr/bin/chromium)
//   TIMEOUT_SECS   optional; overall timeout (default 60)
//
// Flow: open START_URL, read #user_code, click #continue (the gateway answers
// 303 to the IdP), fill #login/#password, click #signin, click #allow if a
// consent page shows, wait for #result back on the gateway.
//
// Stdout: exactly one JSON line.
//   success (exit 0): {"prefilled","result","detail","final_url","pages":[...]}
//     "result" is the text of #result ("Signed in" / "Sign-in failed"); with
//     SUBMIT=no, result and detail are null.
//   failure (exit 1): {"error","url","html" (first 2000 chars),"pages":[...]}
//     e.g. the IdP re-showed its login form: error starts with "login rejected:".

import fs from 'node:fs';
import path from 'node:path';
import { launchChromium } from './chromium.mjs';

const env = process.env;
const START_URL = env.START_URL;
const LOGIN = env.LOGIN;
const PASSWORD = env.PASSWORD;
const EXPECT_CODE = env.EXPECT_CODE;
const SUBMIT = (env.SUBMIT || 'yes').toLowerCase() !== 'no';
const DENY = (env.CONSENT || '').toLowerCase() === 'deny';
const SCREENSHOT_DIR = env.SCREENSHOT_DIR || '';
const TIMEOUT_MS = (Number.parseFloat(env.TIMEOUT_SECS || '') || 60) * 1000;
// Keep a few seconds of the overall budget to report and close the browser.
const WORK_MS = TIMEOUT_MS - Math.min(5000, TIMEOUT_MS * 0.5);
const STEP_MS = 20_000; // a single navigation/selector wait, bounded by the overall deadline

const started = Date.now();
const pages = [];
let browser;
let page;
let shot = 0;
let finished = false;

const remaining = () => Math.max(1, WORK_MS - (Date.now() - started));
const stepTimeout = () => Math.min(STEP_MS, remaining());

class Failure extends Error {}

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

async function closeBrowser() {
  if (!browser) return;
  const b = browser;
  browser = undefined;
  await Promise.race([
    b.close().catch(() => {}),
    new Promise((r) => { setTimeout(r, 2000).unref(); }),
  ]);
}

async function screenshot(label) {
  if (!SCREENSHOT_DIR || !page) return;
  shot += 1;
  const file = path.join(SCREENSHOT_DIR, `${String(shot).padStart(2, '0')}-${label}.png`);
  try {
    await page.screenshot({ path: file, fullPage: true, timeout: 5000 });
  } catch (err) {
    process.stderr.write(`device_login: screenshot ${file} failed: ${err.message}\n`);
  }
}

async function fail(message) {
  if (finished) return;
  finished = true;
  let url = '';
  let html = '';
  if (page) {
    try { url = page.url(); } catch { /* closed */ }
    try {
      html = await Promise.race([
        page.content(),
        new Promise((_, rej) => { setTimeout(() => rej(new Error('timeout')), 1500).unref(); }),
      ]);
    } catch { /* page gone or busy */ }
    if (SCREENSHOT_DIR) {
      try {
        await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'error.png'), fullPage: true, timeout: 1500 });
      } catch { /* ignore */ }
    }
  }
  // Playwright's messages carry ANSI colour codes and a long call log.
  const clean = String(message).replace(/\x1b\[[0-9;]*m/g, '');
  emit({ error: clean, url, html: String(html).slice(0, 2000), pages });
  await closeBrowser();
  process.exit(1);
}

// Click `selector` and wait for the main frame to commit the next document
// (after any 303s) and parse it.
async function clickAndWaitNav(selector) {
  const nav = page.waitForEvent('framenavigated', {
    predicate: (f) => f === page.mainFrame(),
    timeout: stepTimeout(),
  });
  await page.click(selector, { timeout: stepTimeout() });
  await nav;
  await page.waitForLoadState('domcontentloaded', { timeout: stepTimeout() });
}

async function textOf(selector) {
  const el = await page.$(selector);
  if (!el) return null;
  return ((await el.textContent()) || '').trim();
}

async function main() {
  if (!START_URL) throw new Failure('START_URL is not set');
  if (SUBMIT && (!LOGIN || PASSWORD === undefined)) throw new Failure('LOGIN and PASSWORD must be set (or SUBMIT=no)');
  if (SCREENSHOT_DIR) fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });

  browser = await launchChromium(stepTimeout());
  // IGNORE_HTTPS_ERRORS=1: a gateway with a test certificate the browser does not trust.
  const context = await browser.newContext({
    viewport: { width: 900, height: 700 },
    ignoreHTTPSErrors: process.env.IGNORE_HTTPS_ERRORS === '1',
  });
  page = await context.newPage();
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) pages.push(f.url());
  });

  // 1. The gateway's device page.
  const resp = await page.goto(START_URL, { waitUntil: 'domcontentloaded', timeout: stepTimeout() });
  await screenshot('device');
  if (resp && resp.status() >= 400) throw new Failure(`GET START_URL answered HTTP ${resp.status()}`);
  const input = await page.$('#user_code');
  if (!input) throw new Failure('no #user_code input on the device page');
  const prefilled = await input.inputValue();
  if (EXPECT_CODE !== undefined && EXPECT_CODE !== '' && prefilled !== EXPECT_CODE) {
    throw new Failure(`#user_code is pre-filled with ${JSON.stringify(prefilled)}, expected ${JSON.stringify(EXPECT_CODE)}`);
  }
  if (!(await page.$('#continue'))) throw new Failure('no #continue button on the device page');

  if (!SUBMIT) {
    return { prefilled, result: null, detail: null, final_url: page.url(), pages };
  }

  // 2. Continue: gateway -> 303 -> IdP (login, maybe consent) -> gateway callback.
  await clickAndWaitNav('#continue');
  let logins = 0;
  let consents = 0;
  for (;;) {
    await page.waitForSelector('#result, #login, #allow, #idp-error, #user_code', { state: 'attached', timeout: stepTimeout() })
      .catch(() => { throw new Failure('no gateway result (#result), IdP login (#login) or consent (#allow) page appeared'); });

    if (await page.$('#result')) {
      await screenshot('result');
      break;
    }
    if (await page.$('#idp-error')) {
      await screenshot('idp-error');
      const e = await textOf('#error');
      const d = await textOf('#error_description');
      throw new Failure(`IdP error page: ${e}${d ? `: ${d}` : ''}`);
    }
    if (await page.$('#login')) {
      if (logins > 0) {
        await screenshot('login-rejected');
        throw new Failure(`login rejected: ${(await textOf('#error')) ?? 'the IdP showed its login form again'}`);
      }
      await screenshot('login');
      logins += 1;
      await page.fill('#login', LOGIN, { timeout: stepTimeout() });
      await page.fill('#password', PASSWORD, { timeout: stepTimeout() });
      await clickAndWaitNav('#signin');
      continue;
    }
    if (await page.$('#user_code')) {
      await screenshot('device-again');
      throw new Failure('the gateway showed its device form again instead of sending the browser to the IdP');
    }
    if (await page.$('#allow')) {
      if (consents > 0) throw new Failure('the consent page came back after answering it');
      await screenshot('consent');
      consents += 1;
      await clickAndWaitNav(DENY ? '#deny' : '#allow');
      continue;
    }
  }

  const result = await textOf('#result');
  const detail = (await textOf('#detail')) ?? '';
  return { prefilled, result, detail, final_url: page.url(), pages };
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
