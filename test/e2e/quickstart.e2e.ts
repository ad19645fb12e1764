import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { killSpawned, MAIN, ROOT, startServer, stop, stopGroup } from '../support/server-process';

const run = promisify(execFile);

/**
 * The README's quick start, exactly as printed (only the port and data directory moved to a
 * temporary place): the built `npm start` process on embedded defaults, with no database
 * server configured, then the curl example and the SDK examples (OpenAI chat, Anthropic
 * messages, embeddings).
 */
function readmeBlock(marker: RegExp): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/```(\w*)\n([\s\S]*?)```/g)].map((m) => m[2]);
  const block = blocks.find((b) => marker.test(b));
  if (!block) throw new Error(`README has no code block matching ${marker}`);
  return block;
}

afterAll(killSpawned);

/** How long `npm start` may take to answer after a build (it recompiles only what changed). */
const START_BOUND_MS = 30_000;

describe('README quick start on a fresh data directory', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-quickstart-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  beforeAll(() => {
    if (!existsSync(MAIN)) throw new Error('dist/src/main.js is missing: `npm test` builds it first (npm run build)');
  });

  it('starts, prints and writes dev keys, answers the README examples, and reuses the keys on restart', async () => {
    // Issue 15.9: `npm start` after a build answers within seconds, and says what it does meanwhile.
    const first = await startServer(dataDir, { viaNpm: true });
    expect(first.readyMs).toBeLessThan(START_BOUND_MS);
    // It says whether it compiles (after `npm test`'s build there is nothing to compile).
    expect(first.output()).toMatch(/(the build is up to date|compiling what changed)[\s\S]*starting: embedded PostgreSQL[\s\S]*ready on/);
    const keys = JSON.parse(readFileSync(join(dataDir, 'dev-keys.json'), 'utf8'));
    expect(Object.keys(keys).sort()).toEqual(['account_id', 'admin_token', 'api_key', 'live_api_key', 'management_key']);
    expect(keys.api_key).toMatch(/^svc_test_/);
    expect(keys.live_api_key).toMatch(/^svc_live_/);
    // Standard output is no terminal here: the banner is a JSON log line (issue 41, 24) that
    // says where the keys are and their limits, and holds none of them.
    expect(first.output()).toContain(`"dev_keys_file":"${join(dataDir, 'dev-keys.json')}"`);
    expect(first.output()).toContain('live key: 600 requests/min, 64 at once; test key: 60 requests/min, 8 at once');
    expect(first.output()).toContain('$10.00');
    for (const key of [keys.live_api_key, keys.api_key, keys.management_key, keys.admin_token]) expect(first.output()).not.toContain(key);
    // Issue 21: the console is served on the embedded defaults, and the start says where.
    expect(first.output()).toContain(`"console_url":"http://localhost:${first.port}/console/"`);
    const page = await fetch(`http://localhost:${first.port}/console/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<div id="root">');

    const local = (text: string) => text.replaceAll('localhost:8080', `localhost:${first.port}`).replaceAll('./.svc-data', dataDir);

    const curl = await run('bash', ['-euo', 'pipefail', '-c', local(readmeBlock(/curl .*\/v1\/chat\/completions/))], { cwd: ROOT });
    const answer = JSON.parse(curl.stdout);
    expect(answer.choices[0].message.content).toBe('Echo: Hello!');
    expect(answer.usage.cost).toBeGreaterThan(0);
    // Issues 15.13 and 22: one JSON line per request (standard output is not a terminal here),
    // with its generation, caller, provider and cost, and neither the key nor the prompt.
    // Written once the answer is out, so it may reach this process a moment after curl returned.
    const logged = () =>
      first
        .output()
        .split('\n')
        .find((l) => l.includes('"route":"/v1/chat/completions"'));
    for (let waited = 0; !logged() && waited < 5_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    const line = logged()!;
    expect(JSON.parse(line)).toMatchObject({
      level: 30,
      msg: 'POST /v1/chat/completions 200',
      method: 'POST',
      path: '/v1/chat/completions',
      status: 200,
      generation_id: answer.id,
      key_id: expect.any(String),
      account_id: keys.account_id,
      model: answer.model,
      provider: expect.any(String),
      cost: answer.usage.cost,
      latency_ms: expect.any(Number),
    });
    expect(line).not.toMatch(/svc_|Hello/);

    const scratch = join(ROOT, 'node_modules', '.cache', 'svc-readme');
    mkdirSync(scratch, { recursive: true });
    const example = (name: string, marker: RegExp) => {
      writeFileSync(join(scratch, name), local(readmeBlock(marker)));
      return run(process.execPath, [join(scratch, name)], { cwd: ROOT, env: { ...process.env, SVC_API_KEY: keys.live_api_key } });
    };
    // Three processes that each load an SDK, independent of one another: run at once.
    const [sdk, messages, embeddings] = await Promise.all([
      example('example.mjs', /new OpenAI\([\s\S]*chat\.completions\.create/),
      // Issue 41 (25): the Anthropic example is Node too, and runs as printed.
      example('messages.mjs', /new Anthropic\(/),
      // The README's embeddings example, the third family it shows.
      example('embeddings.mjs', /embeddings\.create\(/),
    ]);
    expect(sdk.stdout).toContain('Echo: Hello!');
    expect(sdk.stdout).toMatch(/cost/);
    expect(messages.stdout).toContain('Echo: Hello!');
    expect(messages.stdout).toMatch(/output_tokens/);
    expect(embeddings.stdout).toMatch(/^2 \d+ /);
    expect(embeddings.stdout).toMatch(/prompt_tokens[\s\S]*cost/);

    await stopGroup(first.child, dataDir);
    // The server stopped cleanly: it gave the data directory back.
    expect(existsSync(join(dataDir, 'svc.pid'))).toBe(false);

    // As at a terminal (pino-pretty): the banner prints the keys for the person who started it.
    const second = await startServer(dataDir, { env: { SVC_LOG_FORMAT: 'pretty' } });
    expect(JSON.parse(readFileSync(join(dataDir, 'dev-keys.json'), 'utf8'))).toEqual(keys);
    // Issue 15.11: both full keys printed, each with its limits.
    expect(second.output()).toMatch(new RegExp(`live_api_key +${keys.live_api_key} +full, live key: 600 requests/min, 64 at once`));
    expect(second.output()).toMatch(new RegExp(`api_key +${keys.api_key} +full, test key: 60 requests/min, 8 at once`));
    expect(second.output()).toContain(`The console: http://localhost:${second.port}/console/`);

    // Issue 41 (25): another start on the data directory in use says so in one line, exit 1.
    const env: NodeJS.ProcessEnv = { ...process.env, SVC_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info' };
    for (const name of ['DATABASE_URL', 'EVENTSTORE_URL', 'REDIS_URL']) delete env[name];
    const third = await run(process.execPath, [MAIN], { cwd: ROOT, env }).catch((e) => e);
    expect(third.code).toBe(1);
    expect(third.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/is in use by process \d+ .*Stop it first, or set DATABASE_URL/)]);
    const credits = await fetch(`http://localhost:${second.port}/v1/credits`, { headers: { authorization: `Bearer ${keys.api_key}` } });
    const balance = ((await credits.json()) as { data: { balance: number } }).data.balance;
    expect(balance).toBeLessThan(10);
    expect(await stop(second.child)).toBe(0);
  }, 120_000);

  it('stops at start with a message naming a wrong variable', async () => {
    const result = await run(process.execPath, [MAIN], { cwd: ROOT, env: { ...process.env, SVC_DATA_DIR: dataDir, PORT: 'eighty' } }).catch((e) => e);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('PORT');
  });
});
