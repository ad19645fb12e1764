import { createServer, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { killSpawned, startServer, stop, type ServerProcess } from '../support/server-process';

afterAll(killSpawned);

/**
 * Issue 22: the built server as it runs in production (JSON logs, standard output not a
 * terminal), at the most talkative level, through a run of every kind of request: billed,
 * streamed, failed upstream, refused, with secrets made and shown once. Every line it writes
 * is read afterwards: one JSON line per request with its fields, and no key secret, provider
 * key, webhook secret or prompt text anywhere in the log.
 */
describe('the log of a whole run', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-logs-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  let server: ServerProcess;
  let base: string;
  let keys: Record<string, string>;
  /** What must never be written: every secret seen, and the text of every prompt sent. */
  const secrets: string[] = [];
  const prompts: string[] = [];
  /** Each request made, as the log must tell it. */
  const made: { method: string; path: string; status: number; generation?: string; cost?: number; keyed: boolean }[] = [];

  /** The webhook's receiver, on this machine (hence SVC_WEBHOOK_ALLOW_PRIVATE): deliveries are logged work too. */
  let receiver: Server;
  let delivered = 0;
  afterAll(() => receiver?.close());

  beforeAll(async () => {
    receiver = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        delivered++;
        response.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    server = await startServer(dataDir, { env: { LOG_LEVEL: 'trace', SVC_LOG_FORMAT: 'json', SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
    base = `http://localhost:${server.port}`;
    keys = JSON.parse(readFileSync(join(dataDir, 'dev-keys.json'), 'utf8'));
    secrets.push(keys.api_key, keys.live_api_key, keys.management_key, keys.admin_token);
  }, 60_000);

  /** A request, recorded as made; `body` may be a raw string (bad JSON on purpose). */
  async function call(
    method: string,
    path: string,
    key: string | null,
    body?: unknown,
  ): Promise<{ status: number; json: any; text: string; headers: Headers }> {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    const generation = res.headers.get('x-svc-generation-id') ?? undefined;
    made.push({
      method,
      path: path.split('?')[0],
      status: res.status,
      generation,
      cost: json?.usage?.cost ?? costHeader(res.headers),
      keyed: key !== null && key !== BOGUS && key !== keys.admin_token,
    });
    return { status: res.status, json, text, headers: res.headers };
  }

  /** What an answer without a JSON body (audio) says it cost. */
  const costHeader = (headers: Headers) => (headers.has('x-svc-cost') ? Number(headers.get('x-svc-cost')) : undefined);
  const prompt = (words: string) => {
    prompts.push(words);
    return words;
  };
  const BOGUS = `svc_live_${'Q'.repeat(40)}`;

  it('writes one JSON line per request with its fields, and never a secret or a prompt', async () => {
    const live = keys.live_api_key;
    const chat = (content: string, extra: object = {}) =>
      call('POST', '/v1/chat/completions', live, { model: 'sim/echo', messages: [{ role: 'user', content }], ...extra });

    expect((await chat(prompt('the platypus sings at dawn'))).status).toBe(200);
    const streamed = await chat(prompt('a streamed wombat lullaby'), { stream: true, stream_options: { include_usage: true } });
    expect(streamed.status).toBe(200);
    const usageChunk = streamed.text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)))
      .find((c) => c.usage);
    made[made.length - 1].cost = usageChunk.usage.cost;
    // The first provider fails, the backup answers; then every provider fails: not billed.
    expect((await chat(`${prompt('the quokka falls back')}\n#sim {"fail_models": {"sim/echo": 503}}`, { models: ['sim/small-8k'] })).status).toBe(200);
    expect((await chat(`${prompt('the echidna outage')}\n#sim {"fail": 503}`)).status).toBeGreaterThanOrEqual(500);
    // A client that leaves while the model has not answered yet: its line when it left (499, no
    // head went out) and no error; the generation goes on (spec 1 rule 4).
    const leaving = new AbortController();
    const left = fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${live}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'sim/echo',
        stream: true,
        messages: [{ role: 'user', content: `${prompt('the departing potoroo')}\n#sim {"delay_ms": 400}` }],
      }),
      signal: leaving.signal,
    });
    setTimeout(() => leaving.abort(), 150);
    await expect(left).rejects.toThrow();
    made.push({ method: 'POST', path: '/v1/chat/completions', status: 499, keyed: true });
    for (let i = 0; i < 100 && !logLines().some((l) => l.status === 499); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    // Counted too, once, like every request (issue 22's svc_http_requests_total).
    const metrics = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${keys.admin_token}` } }).then((r) => r.text());
    expect(metrics).toMatch(/^svc_http_requests_total\{[^}]*route="\/v1\/chat\/completions"[^}]*status="499"[^}]*\} 1$/m);
    made.push({ method: 'GET', path: '/metrics', status: 200, keyed: false });
    expect(
      (
        await call('POST', '/v1/messages', live, {
          model: 'sim/claude-echo',
          max_tokens: 32,
          messages: [{ role: 'user', content: prompt('the anthropic numbat') }],
        })
      ).status,
    ).toBe(200);
    expect((await call('POST', '/v1/embeddings', live, { model: 'sim/embed', input: prompt('embedded bilby verse') })).status).toBe(200);
    expect(
      (await call('POST', '/v1/images/generations', live, { model: 'sim/image', prompt: prompt('a painted cassowary'), response_format: 'b64_json' })).status,
    ).toBe(200);
    expect((await call('POST', '/v1/audio/speech', live, { model: 'sim/tts', input: prompt('spoken kookaburra'), voice: 'alloy' })).status).toBe(200);

    // Refusals: bad JSON, an unknown model (the message names it), a key nobody issued.
    expect((await call('POST', '/v1/chat/completions', live, `{"model": "sim/echo", "messages": [{"content": "${prompt('broken dingo json')}"`)).status).toBe(
      400,
    );
    // Refused while its body was read, before its key was: the line names no caller.
    made[made.length - 1].keyed = false;
    expect((await chat(prompt('the unknown taipan'), { model: 'taipan/not-a-model' })).status).toBe(404);
    secrets.push(BOGUS);
    expect((await call('GET', '/v1/models', BOGUS)).status).toBe(401);

    // Secrets made and shown once: a key (then used and rotated), a provider key, a webhook secret.
    const created = await call('POST', '/v1/keys', keys.management_key, { name: 'logged' });
    expect(created.status).toBe(201);
    secrets.push(created.json.key);
    expect(
      (
        await call('POST', '/v1/chat/completions', created.json.key, {
          model: 'sim/echo',
          messages: [{ role: 'user', content: prompt('the created key galah') }],
        })
      ).status,
    ).toBe(200);
    const rotated = await call('POST', `/v1/keys/${created.json.data.id}/rotate`, keys.management_key, { grace_period_seconds: 0 });
    expect(rotated.status).toBe(200);
    secrets.push(rotated.json.key);
    const providerKey = `sk-${'Z9'.repeat(24)}`;
    secrets.push(providerKey);
    expect((await call('PUT', '/v1/provider-keys/sim', keys.management_key, { api_key: providerKey })).status).toBe(200);
    const address = receiver.address() as { port: number };
    const webhook = await call('PUT', '/v1/settings/webhook', keys.management_key, { url: `http://127.0.0.1:${address.port}/hook` });
    expect(webhook.status).toBe(200);
    secrets.push(webhook.json.secret);
    expect((await call('GET', `/admin/accounts/${keys.account_id}`, keys.admin_token)).status).toBe(200);
    // A realtime session (a WebSocket upgrade, which Fastify never sees) with one billed turn, and a refused one.
    const ws = new WebSocket(`ws://localhost:${server.port}/v1/realtime?model=sim/realtime`, { headers: { authorization: `Bearer ${live}` } });
    const done = new Promise<Record<string, any>>((resolve, reject) => {
      ws.on('message', (data) => {
        const event = JSON.parse(data.toString());
        if (event.type === 'response.done') resolve(event);
      });
      ws.on('error', reject);
    });
    await new Promise((resolve) => ws.once('open', resolve));
    made.push({ method: 'GET', path: '/v1/realtime', status: 101, keyed: true });
    ws.send(
      JSON.stringify({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: prompt('the realtime bandicoot') }] },
      }),
    );
    ws.send(JSON.stringify({ type: 'response.create' }));
    expect((await done).response.status).toBe('completed');
    ws.close();
    const refusedWs = new WebSocket(`ws://localhost:${server.port}/v1/realtime?model=sim/realtime`, { headers: { authorization: `Bearer ${BOGUS}` } });
    const refusedStatus = await new Promise((resolve) => refusedWs.once('unexpected-response', (_req, res) => resolve(res.statusCode)));
    expect(refusedStatus).toBe(401);
    made.push({ method: 'GET', path: '/v1/realtime', status: 401, keyed: false });
    expect((await call('GET', '/v1/credits', live)).status).toBe(200);
    // An event for the webhook, delivered by the worker in this process.
    expect((await call('POST', '/v1/keys', keys.management_key, { name: 'announced' }).then((r) => (secrets.push(r.json.key), r))).status).toBe(201);
    for (let i = 0; i < 200 && delivered === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(delivered).toBeGreaterThan(0);

    // The line is written once the response has ended; the last may come a moment after.
    const requestLines = () => logLines().filter((l) => typeof l.route === 'string');
    for (let i = 0; i < 100 && requestLines().length < made.length; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await stop(server.child)).toBe(0);

    // Every request has its line, in order, with the fields of issue 22.
    const lines = requestLines();
    expect(lines.map((l) => `${l.method} ${l.path} ${l.status}`)).toEqual(made.map((m) => `${m.method} ${m.path} ${m.status}`));
    lines.forEach((line, i) => {
      const request = made[i];
      expect(line).toMatchObject({ level: request.status >= 500 ? 50 : 30, latency_ms: expect.any(Number), reqId: expect.any(String) });
      if (request.generation) expect(line.generation_id).toBe(request.generation);
      if (request.keyed) expect(line).toMatchObject({ key_id: expect.stringMatching(/\S/), account_id: keys.account_id });
      // Billed: the provider that answered and the charge, equal to what the caller was told.
      if (request.cost !== undefined)
        expect(line).toMatchObject({ cost: request.cost, provider: expect.stringMatching(/^sim/), upstream_ms: expect.any(Number) });
    });
    const billed = lines.filter((l) => l.cost !== undefined);
    expect(billed.length).toBe(made.filter((m) => m.cost !== undefined).length);
    expect(billed.length).toBeGreaterThanOrEqual(6);
    // The fallback names the provider that answered; the outage the one that failed, and no cost.
    expect(lines[2]).toMatchObject({ provider: expect.stringMatching(/^sim/), cost: expect.any(Number) });
    expect(lines[3].cost).toBeUndefined();

    expect(lines.find((l) => l.status === 499)).toMatchObject({ client_closed: true, level: 30 });

    // Every line is JSON, the start-up banner too, and nothing anywhere holds a secret or a prompt.
    const logged = logText();
    // The client that left is no server error.
    expect(logged).not.toContain('ERR_STREAM_PREMATURE_CLOSE');
    for (const secret of secrets) expect(logged).not.toContain(secret);
    for (const words of prompts) expect(logged).not.toContain(words);
    expect(logged).not.toMatch(/svc_(live|test)_[A-Za-z0-9]{20}/);
    expect(logged).not.toMatch(/whsec_/);
  }, 120_000);

  // Issue 41 (24): the banner was plain text between JSON lines; a collector reads it as a log line.
  it('logs the start-up banner as JSON lines, saying where the dev keys are rather than what they are', () => {
    const lines = parsed(server.output().split('\n'));
    const starting = lines.find((l) => String(l.msg).startsWith('svc-gateway starting'));
    const ready = lines.find((l) => String(l.msg).startsWith('svc-gateway is ready on'));
    expect(starting).toMatchObject({ level: 30, data_dir: dataDir });
    expect(ready).toMatchObject({
      level: 30,
      url: `http://localhost:${server.port}/v1`,
      dev_keys_file: join(dataDir, 'dev-keys.json'),
      account_id: keys.account_id,
    });
    expect(lines.indexOf(starting!)).toBeLessThan(lines.indexOf(ready!));
  });

  /** Each non-empty line of `lines` as the JSON object it must be. */
  function parsed(lines: string[]): Record<string, unknown>[] {
    return lines
      .filter((l) => l.trim() !== '')
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, unknown>;
        } catch {
          throw new Error(`not a JSON log line: ${l}`);
        }
      });
  }
  /** What was logged after the server said it was ready. */
  function logLines(): Record<string, unknown>[] {
    const lines = parsed(server.output().split('\n'));
    return lines.slice(lines.findIndex((l) => String(l.msg).startsWith('svc-gateway is ready on')) + 1);
  }
  function logText(): string {
    parsed(server.output().split('\n'));
    return server.output();
  }
});
