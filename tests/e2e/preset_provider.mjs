// Adds a provider preset (DeepSeek, pointed at ENDPOINT) in the desktop app's Settings tab,
// in Debian's Chromium driven by npm `playwright-core`, presses its Test button and reads
// the result the page shows.
//
// Environment: APP_URL (the app window's URL with its #token), PRESET, KEY, ENDPOINT,
// SCREENSHOT_DIR (optional), TIMEOUT_SECS (default 60).
// Prints one JSON line: {providers, test_result, key_field_after, model_map, console_errors,
// seconds}; on failure {"error"} and exit 1.

import path from 'node:path';
import { launchChromium } from './chromium.mjs';

const env = process.env;
const TIMEOUT_MS = (Number.parseFloat(env.TIMEOUT_SECS || '') || 60) * 1000;
const byTestId = (id) => `[data-testid="${id}"]`;
const consoleErrors = [];
let browser;

async function main() {
  browser = await launchChromium();
  const page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT_MS / 3);
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  await page.goto(env.APP_URL, { waitUntil: 'domcontentloaded' });
  // From here on, what a person does: pick the preset, paste the key, add, test.
  const started = Date.now();
  await page.click(byTestId('tab-settings'));
  await page.waitForSelector(byTestId('preset-provider'));
  await page.selectOption(byTestId('preset-kind'), env.PRESET);
  await page.fill(byTestId('preset-base_url'), env.ENDPOINT);
  await page.fill(byTestId('preset-api_key'), env.KEY);
  await page.click(byTestId('preset-add'));
  const row = `${byTestId('provider')}:has-text("${env.PRESET}")`;
  await page.waitForSelector(row);
  const key_field_after = await page.$eval(byTestId('preset-api_key'), (i) => i.value);
  // The gateway restarts with the provider; Test until it answers (bounded by the timeout).
  let result = '';
  for (let i = 0; i < 50 && !result.startsWith('works'); i += 1) {
    await page.click(`${row} ${byTestId('test-provider')}`);
    await page.waitForTimeout(200);
    const el = await page.$(`${row} ${byTestId('test-result')}`);
    result = el ? ((await el.textContent()) || '').trim() : '';
  }
  const seconds = (Date.now() - started) / 1000;
  const model_map = await page.$eval(`${row} ${byTestId('model-map')}`, (e) => e.textContent.trim());
  const providers = await page.$$eval(byTestId('provider'), (rows) => rows.map((r) => r.textContent.trim()));
  const html = await page.content();
  if (env.SCREENSHOT_DIR) {
    await page.screenshot({ path: path.join(env.SCREENSHOT_DIR, 'preset-provider.png'), fullPage: true });
  }
  const key_in_page = html.includes(env.KEY);
  process.stdout.write(`${JSON.stringify({ providers, test_result: result, key_field_after, key_in_page, model_map, seconds, console_errors: consoleErrors })}\n`);
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
