import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = fileURLToPath(new URL('.', import.meta.url));

/**
 * The console is a static build served by the gateway under /console/ (docs/api/console.md). Every
 * asset is bundled: the page loads nothing from another origin, so it works offline.
 */
export default defineConfig({
  root: here,
  base: '/console/',
  logLevel: 'warn',
  // JSX with React's automatic runtime, compiled by Vite's own transformer (no Babel plugin).
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
  build: {
    outDir: `${here}../../dist/console`,
    emptyOutDir: true,
    // The chart library alone is larger than Vite's default warning size; the console is one
    // page loaded once per sign-in.
    chunkSizeWarningLimit: 1500,
  },
});
