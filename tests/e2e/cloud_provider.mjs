// Adds a Bedrock provider in the desktop app's Settings tab, in Debian's Chromium driven by
// npm `playwright-core`, then presses its Test button and reads the result the page shows.
//
// Environment: APP_URL (the app window's URL with its #token), REGION, KEY_ID, SECRET,
// ENDPOINT (the provider's base URL), SCREENSHOT_DIR (optional), TIMEOUT_SECS (default 60).
// Prints one JSON line: {providers: [...], test_result, key_field_after, console_errors,
// failed_responses};
// on failure {"error"} and exit 1.

import path from 'node:path';
import { launchChromium } from './chromium.mjs';

const env = process.env;
const TIMEOUT_MS = (Number.parseFloat(env.TIMEOUT_SECS || '') || 60) * 1000;
const byTestId = (id) => `[data-testid="${id}"]`;
const consoleErrors = [];
// Every answer of 400 or more, by method and path, so a console error names its request.
const failedResponses = [];
let browser;

async function main() {
  browser = await launchChromium();
  const page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT_MS / 3);
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('response', (r) => {
    if (r.status() >= 400) failedResponses.push(`${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`);
  });
  await page.goto(env.APP_URL, { waitUntil: 'domcontentloaded' });
  await page.click(byTestId('tab-settings'));
  await page.waitForSelector(byTestId('cloud-provider'));
  await page.selectOption(byTestId('cloud-kind'), 'bedrock');
  await page.fill(byTestId('cloud-region'), env.REGION);
  await page.fill(byTestId('cloud-aws_access_key_id'), env.KEY_ID);
  await page.fill(byTestId('cloud-aws_secret_access_key'), env.SECRET);
  await page.fill(byTestId('cloud-base_url'), env.ENDPOINT);
  await page.click(byTestId('cloud-add'));
  await page.waitForSelector(`${byTestId('provider')}:has-text("bedrock")`);
  const key_field_after = await page.$eval(byTestId('cloud-aws_secret_access_key'), (i) => i.value);
  // The gateway restarts with the provider; Test until it answers (bounded by the timeout).
  let result = '';
  for (let i = 0; i < 50 && !result.startsWith('works'); i += 1) {
    await page.click(`${byTestId('provider')}:has-text("bedrock") ${byTestId('test-provider')}`);
    await page.waitForTimeout(200);
    const el = await page.$(`${byTestId('provider')}:has-text("bedrock") ${byTestId('test-result')}`);
    result = el ? ((await el.textContent()) || '').trim() : '';
  }
  const providers = await page.$$eval(byTestId('provider'), (rows) => rows.map((r) => r.textContent.trim()));
  if (env.SCREENSHOT_DIR) {
    await page.screenshot({ path: path.join(env.SCREENSHOT_DIR, 'cloud-provider.png'), fullPage: true });
  }
  process.stdout.write(`${JSON.stringify({ providers, test_result: result, key_field_after, console_errors: consoleErrors, failed_responses: failedResponses })}\n`);
}

const timer = setTimeout(() => {
  process.stdout.write(`${JSON.stringify({ error: 'timed out' })}\n`);
  process.exit(1);
}, TIMEOUT_MS);
timer.unref();
try {
  await main();
  await browser.close();
  process.exit(0);
} catch (e) {
  process.stdout.write(`${JSON.stringify({ error: String(e), console_errors: consoleErrors })}\n`);
  if (browser) await browser.close().catch(() => {});
  process.exit(1);
}
