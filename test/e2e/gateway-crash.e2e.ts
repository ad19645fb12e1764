import { PgSqlRunner } from '@svc/platform';
import { GATEWAY_LEASE_MS, GATEWAY_RENEW_MS, PROGRESS_INTERVAL_MS } from '@svc/ledger';
import { countTextTokens } from '@svc/providers';
import { twoGateways } from '../support/second-gateway';

const ADMIN_TOKEN = 'admin-token-for-gateway-crash-tests';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
/** Output chunks of one token, this far apart: a stream of ~10 s. */
const CHUNK_DELAY_MS = 100;
const OUTPUT_TOKENS = 100;

async function until<T>(value: () => Promise<T | null | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await value();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Issue 14.10: a gateway killed with `kill -9` mid-stream once lost the whole charge, and its
 * holds lingered until they expired (17 minutes). Its streams now record what they delivered
 * every PROGRESS_INTERVAL_MS, and once its lease lapses the worker's reaper charges that (or
 * releases a hold of which nothing was recorded): the loss is at most one interval of output.
 */
describe('a gateway killed mid-request (kill -9)', () => {
  const gateways = twoGateways('crash', ADMIN_TOKEN);
  let db: PgSqlRunner;

  beforeAll(async () => {
    db = await PgSqlRunner.connect({ connectionString: gateways.databaseUrl, max: 2 });
  });
  afterAll(() => db?.close());

  it('has its stream charged for what it recorded, within one interval of what the client got, and its other holds released', async () => {
    const account = (await gateways.one('POST', '/admin/accounts', { body: { initial_credits_usd: 5 }, headers: admin })).json.id;
    const key = (await gateways.one('POST', `/admin/accounts/${account}/keys`, { body: {}, headers: admin })).json.key;
    const before = (await gateways.one('GET', '/v1/credits', { key })).json.data;

    // A request in flight on the victim that has delivered nothing: its hold must be released.
    const silent = fetch(`${gateways.second.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim/echo', max_tokens: 10, messages: [{ role: 'user', content: 'wait\n#sim {"delay_ms": 60000}' }] }),
    }).catch(() => null);

    const response = await fetch(`${gateways.second.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'sim/echo',
        stream: true,
        max_tokens: OUTPUT_TOKENS,
        messages: [{ role: 'user', content: `go\n#sim {"completion_tokens": ${OUTPUT_TOKENS}, "chunk_delay_ms": ${CHUNK_DELAY_MS}}` }],
      }),
    });
    expect(response.status).toBe(200);
    const generationId = response.headers.get('x-svc-generation-id')!;
    const received: { at: number; text: string }[] = [];
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let buffered = '';
    const started = Date.now();
    // Read for two and a half intervals, then kill the process mid-stream.
    while (Date.now() - started < 2.5 * PROGRESS_INTERVAL_MS) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended before the kill');
      buffered += decoder.decode(value, { stream: true });
      const frames = buffered.split('\n\n');
      buffered = frames.pop()!;
      for (const frame of frames) {
        const data = frame.replace(/^data: /, '');
        if (data === '[DONE]') continue;
        const content = JSON.parse(data).choices?.[0]?.delta?.content;
        if (typeof content === 'string' && content !== '') received.push({ at: Date.now(), text: content });
      }
    }
    const killedAt = Date.now();
    gateways.second.child.removeAllListeners('exit');
    gateways.second.child.kill('SIGKILL');
    await reader.cancel().catch(() => undefined);
    await silent;

    // Once the lease lapses the reaper settles both holds (it runs in the first process).
    const counted = async () => {
      const { charges, chargedNano } = gateways.first.runtime.metrics;
      return { charges: (await charges.get()).values[0]?.value ?? 0, nano: (await chargedNano.get()).values[0]?.value ?? 0 };
    };
    const countedBefore = await counted();
    const settled = await until(async () => {
      await gateways.first.background.reaper.reapOnce();
      await gateways.first.runtime.projections.catchUpAll();
      const { rows } = await db.query<{ type: string; data: any; metadata: any }>(
        `SELECT type, data, metadata FROM events WHERE type IN ('UsageCharged', 'HoldReleased') AND data->>'account_id' = $1 ORDER BY tx, seq`,
        [account],
      );
      return rows.length === 2 ? rows : null;
    }, GATEWAY_LEASE_MS + 20_000);
    // Not before the lease it last renewed (up to one renewal before the kill) ran out.
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(GATEWAY_LEASE_MS - GATEWAY_RENEW_MS - 500);

    const charge = settled.find((e) => e.type === 'UsageCharged')!;
    expect(charge.data.hold_id).toBe(generationId);
    expect(charge.metadata.actor).toBe('hold-reaper');
    const charged = charge.data.completion_tokens as number;
    const got = countTextTokens(received.map((r) => r.text).join(''));
    const gotOneIntervalEarlier = countTextTokens(
      received
        .filter((r) => r.at <= killedAt - PROGRESS_INTERVAL_MS - 500)
        .map((r) => r.text)
        .join(''),
    );
    // Billed for no more than the client received, and no less than it had one interval before.
    expect(charged).toBeGreaterThan(0);
    expect(charged).toBeLessThanOrEqual(got);
    expect(charged).toBeGreaterThanOrEqual(gotOneIntervalEarlier);

    // Issue 22: the reaper's charge is in the metrics of the process that recorded it.
    expect(await counted()).toEqual({ charges: countedBefore.charges + 1, nano: countedBefore.nano + Number(charge.data.amount_nano) });

    const released = settled.find((e) => e.type === 'HoldReleased')!;
    expect(released.data.error_code).toBe('gateway_lost');
    expect(released.data.hold_id).not.toBe(generationId);

    // The balance moved by exactly the charge, and no hold is left open. The reaper that charged
    // ran in another process: this gateway's read model shows it once its projection has it.
    const after = await until(async () => {
      const data = (await gateways.one('GET', '/v1/credits', { key })).json.data;
      return data.open_holds === 0 ? data : null;
    }, 10_000);
    expect(Math.round((before.balance - after.balance) * 1e9)).toBe(Number(charge.data.amount_nano));
    expect(after.open_holds).toBe(0);
    const generation = await gateways.one('GET', `/v1/generation?id=${generationId}`, { key });
    expect(generation.json.data.tokens_completion).toBe(charged);
    expect((await db.query('SELECT 1 FROM stream_progress WHERE hold_id = $1', [generationId])).rows).toHaveLength(0);
  }, 60_000);
});
