import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '@svc/platform';
import { startGateway, stopGateway, type StartedGateway } from '../support/gateway';

/** A console build as Vite lays it out: index.html naming a hashed asset. */
function fakeBuild(): string {
  const base = mkdtempSync(join(tmpdir(), 'svc-console-'));
  // A file beside the build, which no path under /console/ may reach.
  writeFileSync(join(base, 'secret.txt'), 'not for the web');
  const dir = join(base, 'build');
  mkdirSync(dir);
  writeFileSync(join(dir, '.env'), 'SECRET=1');
  writeFileSync(join(dir, 'index.html'), '<!doctype html><script type="module" src="/console/assets/index-abc123.js"></script>');
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'assets', 'index-abc123.js'), 'console.log(1)');
  return dir;
}

describe('the console is served by the gateway itself (issue 21)', () => {
  let gw: StartedGateway;
  let root: string;
  beforeAll(async () => {
    gw = await startGateway({ SVC_CONSOLE_DIR: fakeBuild() });
    root = gw.url.replace(/\/v1$/, '');
  });
  afterAll(() => stopGateway(gw));

  it('serves index.html at /console/, never cached, under a policy that keeps it to this origin', async () => {
    const r = await fetch(`${root}/console/`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    expect(r.headers.get('cache-control')).toBe('no-cache');
    const csp = r.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    expect(await r.text()).toContain('/console/assets/index-abc123.js');
  });

  it('lets browsers keep hashed assets for good', async () => {
    const r = await fetch(`${root}/console/assets/index-abc123.js`);
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  });

  it('redirects /console to /console/, and answers a missing file with the error object', async () => {
    const r = await fetch(`${root}/console`, { redirect: 'manual' });
    expect(r.status).toBe(301);
    expect(r.headers.get('location')).toBe('/console/');
    const missing = await fetch(`${root}/console/nope.js`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { type: string } }).error.type).toBe('not_found_error');
  });

  it('serves nothing outside the build directory, nor its dotfiles', async () => {
    for (const path of ['..%2fsecret.txt', '%2e%2e/secret.txt', 'assets/..%2f..%2fsecret.txt', '.env']) {
      const r = await fetch(`${root}/console/${path}`);
      expect([path, r.status]).toEqual([path, 404]);
      expect(await r.text()).not.toMatch(/not for the web|SECRET/);
    }
  });
});

describe('SVC_CONSOLE_DIR', () => {
  it('takes a build directory, off, or finds the build beside the code', () => {
    const dir = fakeBuild();
    expect(loadConfig({ SVC_CONSOLE_DIR: dir }).consoleDir).toBe(dir);
    expect(loadConfig({ SVC_CONSOLE_DIR: 'off' }).consoleDir).toBeNull();
    const found = loadConfig({}).consoleDir;
    // `npm test` builds the console first, so the default finds dist/console.
    expect(found).toMatch(/dist[\\/]console$/);
    expect(readdirSync(found!)).toContain('index.html');
  });

  it('stops the start on a directory without index.html, naming the variable', () => {
    const empty = mkdtempSync(join(tmpdir(), 'svc-console-'));
    expect(() => loadConfig({ SVC_CONSOLE_DIR: empty })).toThrow(ConfigError);
    expect(() => loadConfig({ SVC_CONSOLE_DIR: empty })).toThrow(/SVC_CONSOLE_DIR/);
  });

  it('serves no console when off', async () => {
    const gw = await startGateway({ SVC_CONSOLE_DIR: 'off' });
    try {
      const r = await fetch(`${gw.url.replace(/\/v1$/, '')}/console/`);
      expect(r.status).toBe(404);
    } finally {
      await stopGateway(gw);
    }
  });
});
