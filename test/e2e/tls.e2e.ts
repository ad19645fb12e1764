import OpenAI from 'openai';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { ConfigError, loadConfig } from '@svc/platform';
import { startGateway, stopGateway, type StartedGateway } from '../support/gateway';

/**
 * Issue 20: with SVC_TLS_CERT and SVC_TLS_KEY the gateway serves HTTPS itself, every route on
 * its one port; only one of them, a file that cannot be read or a key that is not the
 * certificate's stops it at start, naming the variable. The certificates are made here, for
 * localhost and 127.0.0.1, with the openssl CLI.
 */
const dir = mkdtempSync(join(tmpdir(), 'svc-tls-'));
const certPath = join(dir, 'cert.pem');
const keyPath = join(dir, 'key.pem');
const otherCertPath = join(dir, 'other-cert.pem');
const otherKeyPath = join(dir, 'other-key.pem');

function selfSigned(cert: string, key: string): void {
  execFileSync(
    '/usr/bin/openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
}

selfSigned(certPath, keyPath);
selfSigned(otherCertPath, otherKeyPath);
const cert = readFileSync(certPath);
const key = readFileSync(keyPath);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The base64 lines of a PEM file: none may appear in an error message. */
const pemBody = (pem: Buffer) =>
  pem
    .toString()
    .split('\n')
    .filter((line) => line && !line.startsWith('-----'));

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('SVC_TLS_CERT and SVC_TLS_KEY (configuration)', () => {
  it('are unset by default: plain HTTP', () => {
    expect(loadConfig({}).tls).toBeNull();
    expect(loadConfig({ SVC_TLS_CERT: ' ', SVC_TLS_KEY: '' }).tls).toBeNull();
  });

  it('read both PEM files at start', () => {
    const { tls } = loadConfig({ SVC_TLS_CERT: ` ${certPath} `, SVC_TLS_KEY: keyPath });
    expect(tls).not.toBeNull();
    expect(tls!.cert.equals(cert)).toBe(true);
    expect(tls!.key.equals(key)).toBe(true);
  });

  it('refuse one without the other, naming the one missing', () => {
    const noKey = configError({ SVC_TLS_CERT: certPath });
    expect(noKey.variable).toBe('SVC_TLS_KEY');
    expect(noKey.message).toMatch(/^SVC_TLS_KEY: not set, but SVC_TLS_CERT is/);
    const noCert = configError({ SVC_TLS_KEY: keyPath });
    expect(noCert.variable).toBe('SVC_TLS_CERT');
    expect(noCert.message).toMatch(/^SVC_TLS_CERT: not set, but SVC_TLS_KEY is/);
  });

  it('refuse a path that cannot be read, naming its variable', () => {
    const missing = join(dir, 'missing.pem');
    expect(configError({ SVC_TLS_CERT: missing, SVC_TLS_KEY: keyPath }).message).toBe(`SVC_TLS_CERT: cannot read ${JSON.stringify(missing)} (ENOENT)`);
    expect(configError({ SVC_TLS_CERT: certPath, SVC_TLS_KEY: missing }).message).toBe(`SVC_TLS_KEY: cannot read ${JSON.stringify(missing)} (ENOENT)`);
    expect(configError({ SVC_TLS_CERT: dir, SVC_TLS_KEY: keyPath }).message).toMatch(/^SVC_TLS_CERT: cannot read .*\(EISDIR\)$/);
  });

  it('refuse a key that is not the certificate’s, naming SVC_TLS_KEY', () => {
    const err = configError({ SVC_TLS_CERT: certPath, SVC_TLS_KEY: otherKeyPath });
    expect(err.message).toMatch(/^SVC_TLS_KEY: the key in .*other-key\.pem" does not match the certificate in .*cert\.pem" \(SVC_TLS_CERT\)$/);
    expect(configError({ SVC_TLS_CERT: otherCertPath, SVC_TLS_KEY: keyPath }).variable).toBe('SVC_TLS_KEY');
  });

  it('refuse files that hold something else, never repeating what the key file holds', () => {
    // Swapped: the certificate variable names the key file.
    const swapped = configError({ SVC_TLS_CERT: keyPath, SVC_TLS_KEY: certPath });
    expect(swapped.message).toMatch(/^SVC_TLS_CERT: .* holds no PEM certificate/);
    const notAKey = configError({ SVC_TLS_CERT: certPath, SVC_TLS_KEY: certPath });
    expect(notAKey.message).toMatch(/^SVC_TLS_KEY: .* holds no unencrypted PEM private key/);
    for (const err of [swapped, notAKey, configError({ SVC_TLS_CERT: certPath, SVC_TLS_KEY: otherKeyPath })]) {
      for (const line of [...pemBody(key), ...pemBody(readFileSync(otherKeyPath))]) expect(err.message).not.toContain(line);
    }
  });
});

describe('HTTPS on the gateway port (issue 20)', () => {
  let gw: StartedGateway;
  let port: number;
  /** Trusts the test certificate, and only it. */
  const agent = new Agent({ connect: { ca: cert } });
  const tlsFetch = (url: string, init: Parameters<typeof undiciFetch>[1] = {}) => undiciFetch(url, { ...init, dispatcher: agent });

  beforeAll(async () => {
    gw = await startGateway({ SVC_TLS_CERT: certPath, SVC_TLS_KEY: keyPath });
    port = Number(new URL(gw.url).port);
  }, 60_000);
  afterAll(async () => {
    await stopGateway(gw);
    await agent.close();
  });

  it('says https in its URL', () => {
    expect(gw.url).toBe(`https://localhost:${port}/v1`);
  });

  it('answers GET /v1/models and a chat completion over HTTPS', async () => {
    const models = await tlsFetch(`https://127.0.0.1:${port}/v1/models`, { headers: { authorization: `Bearer ${gw.keys.api_key}` } });
    expect(models.status).toBe(200);
    expect(((await models.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toContain('sim/echo');

    const chat = await tlsFetch(`https://localhost:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim/echo', messages: [{ role: 'user', content: 'Hello over TLS' }], max_tokens: 16 }),
    });
    expect(chat.status).toBe(200);
    const body = (await chat.json()) as { object: string; choices: { message: { content: string } }[] };
    expect(body.object).toBe('chat.completion');
    expect(body.choices[0].message.content.length).toBeGreaterThan(0);
  });

  it('serves the official openai SDK on an https base URL', async () => {
    const client = new OpenAI({
      baseURL: `https://localhost:${port}/v1`,
      apiKey: gw.keys.api_key,
      maxRetries: 0,
      fetch: ((url: string, init: object) => tlsFetch(url, init)) as unknown as typeof fetch,
    });
    const completion = await client.chat.completions.create({ model: 'sim/echo', messages: [{ role: 'user', content: 'Hello, SDK' }], max_tokens: 16 });
    expect(completion.object).toBe('chat.completion');
    expect(completion.choices[0].message.content).toBeTruthy();
  });

  it('refuses a client that does not trust the certificate', async () => {
    await expect(undiciFetch(`https://localhost:${port}/v1/models`)).rejects.toThrow();
  });

  it('gives plain HTTP on the same port no HTTP answer', async () => {
    await expect(fetch(`http://127.0.0.1:${port}/v1/models`, { signal: AbortSignal.timeout(10_000) })).rejects.toThrow(/fetch failed/);
    // On the wire: the connection is closed without a status line.
    const received = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write('GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n'));
      let data = '';
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('the connection was left open'));
      }, 10_000);
      socket.on('data', (chunk) => (data += chunk.toString('latin1')));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve(data);
      });
    });
    expect(received).not.toMatch(/HTTP\/1\.[01] \d{3}/);
  });
});

/**
 * Issue 41 (25): `npm run dev-cert` makes a certificate the gateway serves on localhost, and a
 * Node client trusts it through NODE_EXTRA_CA_CERTS alone (no rejectUnauthorized: false), as
 * the TLS steps of docs/operations.md say.
 */
describe('npm run dev-cert', () => {
  const devDir = join(dir, 'dev-tls');
  let gw: StartedGateway;
  beforeAll(async () => {
    execFileSync('npm', ['run', '--silent', 'dev-cert', '--', devDir], { cwd: join(__dirname, '..', '..'), stdio: 'pipe' });
    gw = await startGateway({ SVC_TLS_CERT: join(devDir, 'localhost.pem'), SVC_TLS_KEY: join(devDir, 'localhost-key.pem') });
  }, 60_000);
  afterAll(() => stopGateway(gw));

  // Asynchronous: the gateway runs in this process and must answer while the client waits.
  const client = (env: NodeJS.ProcessEnv) => {
    const script = `fetch(${JSON.stringify(`${gw.url.replace(/\/v1$/, '')}/health/live`)}).then((r) => console.log(r.status), (e) => console.log(e.cause?.code ?? e.message))`;
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
    if (!env.NODE_EXTRA_CA_CERTS) delete childEnv.NODE_EXTRA_CA_CERTS;
    return new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ['-e', script], { env: childEnv }, (err, stdout) => (err ? reject(err) : resolve(stdout.trim()))),
    );
  };

  it('is trusted by a Node client given its CA in NODE_EXTRA_CA_CERTS, and not without', async () => {
    expect(gw.url).toMatch(/^https:/);
    expect(await client({ NODE_EXTRA_CA_CERTS: join(devDir, 'ca.pem') })).toBe('200');
    expect(await client({})).toMatch(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|UNABLE_TO_GET_ISSUER_CERT/);
  });
});
