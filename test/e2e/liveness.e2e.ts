import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

/**
 * Generous: a liveness property, not a speed goal (those live in bench/). The bugs it guards held
 * the process for 269 s and ~700 s; the pings share two cores with another jest worker and its
 * gateways, which stalled one for 4.9 s in a CI run where it had no bug, so 3 s was too tight.
 */
const LIVENESS_BOUND_MS = 10_000;

/**
 * Issue 14.3: 100,000 x "B" as a system prompt on the free count_tokens route held a gateway
 * for 269 s, and 200 kB of one letter in a chat body ~700 s. While such bodies are processed,
 * the same process keeps answering.
 */
describe('liveness under hostile bodies', () => {
  let gw: StartedGateway;
  let call: Call;

  beforeAll(async () => {
    gw = await startGateway();
    call = api(gw.url.replace(/\/v1$/, ''));
  }, 60_000);
  afterAll(() => stopGateway(gw));

  it('answers GET /v1/credits within seconds throughout, and each hostile request with a normal status', async () => {
    const key = gw.keys.api_key;
    const base64 = Buffer.alloc(6_000_000, 'base64-like text is the slowest to encode;').toString('base64');
    const hostile: [string, string, unknown][] = [
      [
        'count_tokens, 100 kB of one letter as system',
        '/v1/messages/count_tokens',
        { model: 'sim/echo', system: 'B'.repeat(100_000), messages: [{ role: 'user', content: 'hi' }] },
      ],
      [
        'count_tokens, 1 MB of one letter as system',
        '/v1/messages/count_tokens',
        { model: 'sim/echo', system: 'B'.repeat(1_000_000), messages: [{ role: 'user', content: 'hi' }] },
      ],
      ['count_tokens, 8 MB of base64', '/v1/messages/count_tokens', { model: 'sim/echo', messages: [{ role: 'user', content: base64 }] }],
      ['chat, 200 kB of one letter', '/v1/chat/completions', { model: 'sim/echo', max_tokens: 4, messages: [{ role: 'user', content: 'B'.repeat(200_000) }] }],
      ['chat, 9 MB of one letter', '/v1/chat/completions', { model: 'sim/echo', max_tokens: 4, messages: [{ role: 'user', content: 'B'.repeat(9_000_000) }] }],
      ['embeddings, 8 MB of base64', '/v1/embeddings', { model: 'sim/embed', input: base64 }],
    ];

    // Serialized before the pings start, so that they time the gateway and not this test's own
    // JSON.stringify of 25 MB, which runs on the same event loop as the gateway.
    const bodies = hostile.map(([, , body]) => JSON.stringify(body));

    const pings: number[] = [];
    let running = true;
    const pinger = (async () => {
      while (running) {
        const started = performance.now();
        const r = await call('GET', '/v1/credits', { key });
        expect(r.status).toBe(200);
        pings.push(performance.now() - started);
      }
    })();
    const outcomes = await Promise.all(
      hostile.map(async ([what, path], i) => {
        const r = await call('POST', path, { key, body: bodies[i] });
        return { what, status: r.status, error: r.json?.error ?? null };
      }),
    );
    running = false;
    await pinger;

    for (const o of outcomes) expect({ what: o.what, ok: o.status < 500 }).toEqual({ what: o.what, ok: true });
    // count_tokens answers a number for all of them: an upper bound past the budget, exact below.
    expect(outcomes.slice(0, 3).map((o) => o.status)).toEqual([200, 200, 200]);
    expect(pings.length).toBeGreaterThan(3);
    expect(Math.max(...pings)).toBeLessThan(LIVENESS_BOUND_MS);
  }, 60_000);
});
