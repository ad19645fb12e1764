import OpenAI from 'openai';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGatewayApp } from '../../apps/gateway/src/app';
import { settingsStream } from '@svc/identity';
import { loadConfig, usdToNano } from '@svc/platform';
import { createRuntime } from '@svc/runtime';
import { CALLER_KEY, catalogWithStub, OPERATOR_KEY, REJECTED_KEY, startUpstream } from '../support/byok-upstream';
import { chargeEventOf, costLinesOf } from '../support/cost-lines';
import { api, startGateway } from '../support/gateway';
import { seedPglite } from '../support/pglite-template';

// What the stub reports (USAGE): 11 prompt and 7 completion tokens at the model's $2 / $8 per M.
const FULL_COST = 11n * 2000n + 7n * 8000n; // 78_000 nano-USD
const FEE = (FULL_COST * 5n + 99n) / 100n; // 5 %, rounded up: 3_900 nano-USD

describe('bring your own key (issue 5: BYOK; spec 1, 7)', () => {
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let dir: string;
  let env: Record<string, string>;
  let gw: Awaited<ReturnType<typeof startGateway>>;
  let call: ReturnType<typeof api>;
  let client: OpenAI;

  const start = async () => {
    gw = await startGateway(env, dir);
    call = api(gw.url.replace(/\/v1$/, ''));
    client = new OpenAI({ baseURL: gw.url, apiKey: gw.keys.api_key, maxRetries: 0 });
  };

  beforeAll(async () => {
    upstream = await startUpstream();
    dir = mkdtempSync(join(tmpdir(), 'svc-e2e-'));
    env = { SVC_CATALOG: catalogWithStub(dir, upstream.url) };
    await start();
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    gw?.removeDataDir();
    await upstream?.close();
  });

  const admin = (method: string, path: string, body?: unknown) => call(method, `/admin${path}`, { key: gw.keys.admin_token, body });
  const keysPath = () => `/accounts/${gw.keys.account_id}/provider-keys`;
  const balance = async () => usdToNano((await call('GET', '/v1/credits', { key: gw.keys.api_key })).json.data.balance);
  const held = async () => (await call('GET', '/v1/credits', { key: gw.keys.api_key })).json.data.held as number;
  const settingsEvents = () => gw.runtime.store.readStream(settingsStream(gw.keys.account_id));
  /** Everything the log holds of the events, positions included (bigint as text). */
  const logText = (events: unknown[]) => JSON.stringify(events, (_, v) => (typeof v === 'bigint' ? v.toString() : v));
  const ask = () => client.chat.completions.create({ model: 'test/byok', messages: [{ role: 'user', content: 'hello' }], max_tokens: 50 }).withResponse();

  it('saves a key through the operator API, answering and listing only its hint', async () => {
    const saved = await admin('PUT', `${keysPath()}/stub`, { api_key: CALLER_KEY });
    expect(saved.status).toBe(200);
    expect(saved.json).toEqual({ data: { provider: 'stub', hint: '...wxyz' } });

    const listed = await admin('GET', keysPath());
    expect(listed.status).toBe(200);
    expect(listed.json.data).toEqual([{ provider: 'stub', hint: '...wxyz', saved_at: expect.any(String) }]);
    expect(JSON.stringify(listed.json)).not.toContain(CALLER_KEY);
  });

  it('records only the ciphertext in the settings stream, and audits the change', async () => {
    const events = await settingsEvents();
    expect(events.map((e) => e.type)).toEqual(['ProviderKeySaved']);
    expect(logText(events)).not.toContain(CALLER_KEY.slice(-16));
    expect((events[0].data as { encrypted_key: string }).encrypted_key).toMatch(/^v1:/);

    const audit = await admin('GET', `/audit-log?account_id=${gw.keys.account_id}`);
    expect(audit.json.data).toContainEqual(
      expect.objectContaining({ action: 'provider_key.saved', actor: 'admin', target_id: 'stub', details: { provider: 'stub', hint: '...wxyz' } }),
    );
  });

  it('calls the upstream with the caller key and bills only the fee, to the nano', async () => {
    const before = await balance();
    const calls = upstream.seen.length;
    const { data, response } = await ask();
    expect(upstream.seen.slice(calls)).toEqual([`Bearer ${CALLER_KEY}`]);
    expect(usdToNano((data.usage as unknown as { cost: number }).cost)).toBe(FEE);
    expect(before - (await balance())).toBe(FEE);
    expect(await held()).toBe(0);

    const id = response.headers.get('x-svc-generation-id')!;
    const generation = (await call('GET', `/v1/generation?id=${id}`, { key: gw.keys.api_key })).json.data;
    expect(generation.provider).toBe('stub:byok');
    // Issue 23: what the operator's key would have cost, credited back, then the fee on it, rounded up.
    expect(generation).toMatchObject({ byok: true, batch: false });
    expect(costLinesOf(generation)).toEqual([
      ['input', 11, 0.000002, 22_000n],
      ['output', 7, 0.000008, 56_000n],
      ['byok_credit', 1, -0.000078, -FULL_COST],
      ['byok_fee', 5, 0.00000078, FEE],
    ]);
    // The account's own provider account paid for the call: it cost the operator nothing.
    expect((await chargeEventOf(gw.runtime, gw.keys.account_id, id)).provider_cost_nano).toBe('0');
  });

  it('bills only the fee for a stream too', async () => {
    const before = await balance();
    const stream = await client.chat.completions.create({
      model: 'test/byok',
      messages: [{ role: 'user', content: 'hello' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let cost: number | undefined;
    for await (const chunk of stream) if (chunk.usage) cost = (chunk.usage as unknown as { cost: number }).cost;
    expect(usdToNano(cost!)).toBe(FEE);
    // The stream settles after its last event: wait for the balance to move.
    for (let i = 0; i < 50 && before - (await balance()) !== FEE; i++) await new Promise((r) => setTimeout(r, 20));
    expect(before - (await balance())).toBe(FEE);
    expect(upstream.seen.at(-1)).toBe(`Bearer ${CALLER_KEY}`);
  });

  it('keeps the generated dev encryption key (0600) and opens saved keys after a restart', async () => {
    const keyFile = join(dir, 'encryption.key');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    const key = readFileSync(keyFile, 'utf8');
    await gw.close();
    await start();
    expect(readFileSync(keyFile, 'utf8')).toBe(key);
    await ask();
    expect(upstream.seen.at(-1)).toBe(`Bearer ${CALLER_KEY}`);
  }, 30_000);

  it('bills the fee SVC_BYOK_FEE_PERCENT sets', async () => {
    await gw.close();
    env = { ...env, SVC_BYOK_FEE_PERCENT: '12' };
    await start();
    const before = await balance();
    const { data } = await ask();
    const fee = (FULL_COST * 12n + 99n) / 100n; // 9_360 nano-USD
    expect(usdToNano((data.usage as unknown as { cost: number }).cost)).toBe(fee);
    expect(before - (await balance())).toBe(fee);
  }, 30_000);

  it('answers byok_key_rejected when the provider refuses the caller key, without billing or retrying it', async () => {
    expect((await admin('PUT', `${keysPath()}/stub`, { api_key: REJECTED_KEY })).json.data.hint).toBe('...2222');
    const before = await balance();
    const calls = upstream.seen.length;
    const error = await ask().then(
      () => null,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    expect(error?.status).toBe(401);
    expect(error?.error).toMatchObject({ code: 'byok_key_rejected', type: 'authentication_error' });
    expect(upstream.seen.slice(calls)).toEqual([`Bearer ${REJECTED_KEY}`]);
    expect(await balance()).toBe(before);
    expect(await held()).toBe(0);
  });

  it('returns to the operator key and full billing once the key is deleted', async () => {
    const deleted = await admin('DELETE', `${keysPath()}/stub`);
    expect(deleted.status).toBe(200);
    expect((await admin('GET', keysPath())).json.data).toEqual([]);
    const audit = await admin('GET', `/audit-log?account_id=${gw.keys.account_id}`);
    expect(audit.json.data.map((e: { action: string }) => e.action)).toContain('provider_key.deleted');
    const events = await settingsEvents();
    expect(events.map((e) => e.type)).toEqual(['ProviderKeySaved', 'ProviderKeySaved', 'ProviderKeyDeleted']);
    expect(logText(events)).not.toContain(CALLER_KEY.slice(-16));
    expect(logText(events)).not.toContain(REJECTED_KEY.slice(-16));

    const before = await balance();
    const { data } = await ask();
    expect(upstream.seen.at(-1)).toBe(`Bearer ${OPERATOR_KEY}`);
    expect(usdToNano((data.usage as unknown as { cost: number }).cost)).toBe(FULL_COST);
    expect(before - (await balance())).toBe(FULL_COST);
  });

  it('refuses a provider outside the catalog, an unknown key and a malformed one', async () => {
    const unknown = await admin('PUT', `${keysPath()}/nobody`, { api_key: CALLER_KEY });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe('provider_not_found');
    const missing = await admin('DELETE', `${keysPath()}/stub`);
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe('provider_key_not_found');
    expect((await admin('PUT', `${keysPath()}/stub`, { api_key: 'has space' })).status).toBe(400);
    expect((await admin('PUT', `${keysPath()}/stub`, {})).status).toBe(400);
    expect((await admin('PUT', `/accounts/acc_missing/provider-keys/stub`, { api_key: CALLER_KEY })).status).toBe(404);
  });
});

describe('bring your own key without SVC_ENCRYPTION_KEY (the production gateway)', () => {
  it('refuses to save a provider key with 503 byok_unavailable', async () => {
    // createRuntime + createGatewayApp, as apps/gateway/src/main.ts starts it: no dev key is generated.
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-e2e-'));
    const config = loadConfig({ SVC_DATA_DIR: dataDir, PORT: '0' });
    expect(config.encryptionKey).toBeNull();
    seedPglite(dataDir);
    const runtime = await createRuntime(config, { adminToken: 'admin-token-0123456789' });
    // What the worker process does beside it: the new account is read from its projection.
    runtime.projections.start();
    const app = await createGatewayApp(runtime, { logger: false });
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.getHttpServer().address() as AddressInfo;
      const call = api(`http://127.0.0.1:${port}`);
      const created = await call('POST', '/admin/accounts', { key: 'admin-token-0123456789', body: {} });
      const saved = await call('PUT', `/admin/accounts/${created.json.id}/provider-keys/sim`, { key: 'admin-token-0123456789', body: { api_key: CALLER_KEY } });
      expect(saved.status).toBe(503);
      expect(saved.json.error).toMatchObject({ type: 'service_unavailable', code: 'byok_unavailable' });
    } finally {
      await app.close();
      await runtime.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 30_000);
});
