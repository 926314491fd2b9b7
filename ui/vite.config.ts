// The dashboard is served by the engine under a strict CSP (no inline script or style):
// every asset is a file under /assets/, nothing is inlined, nothing loads from elsewhere.
// Two pages: the dashboard (index.html, served at /) and the team console (console.html,
// served at /console on the central server).
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    cssCodeSplit: false,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
    rolldownOptions: {
      input: { index: 'index.html', console: 'console.html' },
    },
  },
});
