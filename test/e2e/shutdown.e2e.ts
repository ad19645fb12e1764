import type { ChildProcess } from 'node:child_process';
import { spawnGateway, twoGateways } from '../support/second-gateway';

const ADMIN_TOKEN = 'admin-token-for-shutdown-tests';
const GRACE_MS = 2_000;
/** Slack for a loaded CI machine on top of the grace period. */
const SLACK_MS = 4_000;

function exited(child: ChildProcess): Promise<{ code: number | null; afterMs: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', (code) => resolve({ code, afterMs: performance.now() - started }));
  });
}

/** A stream of ~50 s on `url`, read until its first output arrived; the response is left open. */
async function longStream(url: string, key: string): Promise<Response> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'sim/echo',
      stream: true,
      max_tokens: 100,
      messages: [{ role: 'user', content: 'go\n#sim {"completion_tokens": 100, "chunk_delay_ms": 500}' }],
    }),
  });
  expect(response.status).toBe(200);
  await response.body!.getReader().read();
  return response;
}

/**
 * Issue 14.3: SIGTERM was ignored while a request held the process. A process stops within
 * SVC_SHUTDOWN_GRACE_MS whatever its requests do (what its streams recorded is charged by the
 * hold reaper), and at once on a second signal.
 */
describe('stopping a gateway process', () => {
  const gateways = twoGateways('shutdown', ADMIN_TOKEN, { SVC_SHUTDOWN_GRACE_MS: String(GRACE_MS) });
  let key: string;
  /** Processes of these tests: a failed assertion must not leave one running for jest to wait on. */
  const started: ChildProcess[] = [];
  afterAll(() => {
    for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });

  beforeAll(async () => {
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const account = (await gateways.one('POST', '/admin/accounts', { body: { initial_credits_usd: 5 }, headers: admin })).json.id;
    key = (await gateways.one('POST', `/admin/accounts/${account}/keys`, { body: {}, headers: admin })).json.key;
  });

  it('exits cleanly (status 0) at once when nothing runs', async () => {
    const idle = await spawnGateway(gateways.databaseUrl, ADMIN_TOKEN, { SVC_SHUTDOWN_GRACE_MS: String(GRACE_MS) });
    started.push(idle.child);
    const exit = exited(idle.child);
    idle.child.kill('SIGTERM');
    const { code, afterMs } = await exit;
    expect(code).toBe(0);
    expect(afterMs).toBeLessThan(GRACE_MS);
  });

  it('exits within its grace period while a long stream runs', async () => {
    const response = await longStream(gateways.second.url, key);
    const exit = exited(gateways.second.child);
    gateways.second.child.kill('SIGTERM');
    const { code, afterMs } = await exit;
    expect(code).toBe(1);
    expect(afterMs).toBeGreaterThanOrEqual(GRACE_MS - 100);
    expect(afterMs).toBeLessThan(GRACE_MS + SLACK_MS);
    await response.body?.cancel().catch(() => undefined);
  });

  it('exits at once on a second signal, without waiting out a long grace period', async () => {
    const patient = await spawnGateway(gateways.databaseUrl, ADMIN_TOKEN, { SVC_SHUTDOWN_GRACE_MS: '600000' });
    started.push(patient.child);
    const response = await longStream(patient.url, key);
    const exit = exited(patient.child);
    patient.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    patient.child.kill('SIGTERM');
    const { code, afterMs } = await exit;
    expect(code).toBe(1);
    expect(afterMs).toBeLessThan(SLACK_MS);
    await response.body?.cancel().catch(() => undefined);
  });
});
