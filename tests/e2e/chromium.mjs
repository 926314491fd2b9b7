// Debian's Chromium (never a downloaded browser) for the end-to-end scripts, started the
// way this machine's closed network needs: no background networking, no QUIC, no sandbox
// (CI runs as root), a fresh profile.
import { chromium } from 'playwright-core';

export function launchChromium(timeout) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    timeout,
    args: [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
}

/** Closes `browser`, waiting at most `ms` for it. */
export async function closeWithin(browser, ms = 2000) {
  if (!browser) return;
  await Promise.race([browser.close().catch(() => {}), new Promise((r) => { setTimeout(r, ms).unref(); })]);
}

/**
 * What a failed run reports of its page: the URL and the start of its HTML (each read at
 * most 1.5 s), and a screenshot to `errorShot` when given. The message loses Playwright's
 * colour codes.
 */
export async function failureReport(page, message, errorShot) {
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
    if (errorShot) {
      try { await page.screenshot({ path: errorShot, fullPage: true, timeout: 1500 }); } catch { /* ignore */ }
    }
  }
  return { error: String(message).replace(/\x1b\[[0-9;]*m/g, ''), url, html: String(html).slice(0, 2000) };
}
