import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, stopGateway, type StartedGateway } from '../support/gateway';

/**
 * Issue 41 S5, spec 2.1: every 4XX/5XX body is the error object, on the static routes too (the
 * console under /console/ and the API reference under /docs/), whatever the path holds: a NUL,
 * an encoded slash or dot-dot, bad percent-encoding, a dotfile. Sent as raw paths with
 * node:http, since fetch would normalize some of them away.
 */
describe('bad paths under the static routes answer the spec error object (issue 41 S5)', () => {
  let gw: StartedGateway;
  let port: number;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-console-'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><p>console</p>');
    writeFileSync(join(dir, '.env'), 'SECRET=1');
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'assets', 'app-1.js'), 'console.log(1)');
    gw = await startGateway({ SVC_CONSOLE_DIR: dir });
    port = Number(new URL(gw.url).port);
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
  });

  function get(path: string): Promise<{ status: number; type: string; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  const paths = [
    '/console/%00',
    '/docs/%00',
    '/console/a%00b.js',
    '/docs/swagger-ui.css%00',
    '/console/%2e%2e/%2e%2e/etc/passwd',
    '/console/..%2f..%2fsecret.txt',
    '/docs/..%2f..%2fpackage.json',
    '/console/%ff',
    '/docs/%ff',
    '/console/%',
    '/docs/%zz',
    '/console/.env',
    '/console/%2eenv',
    '/docs/.%2e/.%2e/',
    '/console/assets/missing.js',
  ];

  it.each(paths)('GET %s: a 4XX whose body is the error object', async (path) => {
    const r = await get(path);
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.type).toMatch(/^application\/json/);
    const body = JSON.parse(r.body);
    expect(Object.keys(body)).toEqual(['error']);
    expect(body.error).toEqual({ message: expect.any(String), type: expect.any(String), code: expect.anything(), param: null });
    expect(r.body).not.toContain('SECRET');
  });

  it('still serves the console and the API reference', async () => {
    expect((await get('/console/')).body).toContain('console');
    expect((await get('/console/assets/app-1.js')).status).toBe(200);
    expect((await get('/docs/swagger-ui.css')).status).toBe(200);
  });
});
