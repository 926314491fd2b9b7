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
