import OpenAI from 'openai';
import { setTimeout as sleep } from 'node:timers/promises';
import { PROMPT_LOGS_TABLE } from '@svc/conversations';
import { ManualClock } from '@svc/platform';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { until } from '../support/until';

const PIXEL = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

describe('prompt logging (spec 1, 8): off by default, encrypted at rest, purgeable, kept for its retention', () => {
  const clock = new ManualClock(new Date());
  let gw: StartedGateway;
  let call: Call;
  let client: OpenAI;
  let management: string;

  beforeAll(async () => {
    gw = await startGateway({}, undefined, { clock });
    call = api(gw.url);
    client = new OpenAI({ baseURL: gw.url, apiKey: gw.keys.api_key, maxRetries: 0 });
    management = gw.keys.management_key;
  }, 60_000);
  afterAll(() => stopGateway(gw));

  const rows = async () => (await gw.runtime.sql.query<Record<string, string>>(`SELECT * FROM ${PROMPT_LOGS_TABLE}`)).rows;
  const logs = async () => (await call('GET', '/prompt-logs?limit=100', { key: management })).json.data as { generation_id: string }[];
  const setLogging = (body: object) => call('PATCH', '/settings', { key: management, body: { prompt_logging: body } });

  it('keeps nothing while off (the default)', async () => {
    await client.chat.completions.create({ model: 'sim/echo', messages: [{ role: 'user', content: 'nothing to keep' }] });
    await sleep(300);
    expect(await rows()).toEqual([]);
    expect(await logs()).toEqual([]);
  });

  it('on: keeps prompt and response, readable through the API, encrypted at rest, inline images as a placeholder', async () => {
    expect((await setLogging({ enabled: true, retention_days: 2 })).status).toBe(200);
    const completion = await client.chat.completions.create({
      model: 'sim/echo',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'the secret word is platypus' },
            { type: 'image_url', image_url: { url: PIXEL } },
          ],
        },
      ],
    });
    const log = await until('the log', async () => {
      const r = await call('GET', `/prompt-logs/${completion.id}`, { key: management });
      return r.status === 200 && r.json.data;
    });
    expect(log).toMatchObject({ generation_id: completion.id, endpoint: '/v1/chat/completions', key_id: expect.any(String) });
    expect(JSON.stringify(log.request)).toContain('the secret word is platypus');
    expect(log.request.messages[0].content[1]).toEqual({ type: 'image_url', image_url: { url: '[image omitted]' } });
    expect(log.response.choices[0].message.content).toBe(completion.choices[0].message.content);
    expect(new Date(log.expires_at).getTime() - new Date(log.created_at).getTime()).toBe(2 * 24 * 3600_000);

    const [row] = await rows();
    expect(row.request).toMatch(/^v1:/);
    expect(JSON.stringify(await rows())).not.toContain('platypus');
    expect(JSON.stringify(await rows())).not.toContain('iVBORw0KGgo');
  });

  it('keeps a streamed answer as it was sent', async () => {
    const stream = await client.chat.completions.create({ model: 'sim/echo', stream: true, messages: [{ role: 'user', content: 'stream this' }] });
    let id = '';
    for await (const chunk of stream) id = chunk.id;
    const log = await until('the streamed log', async () => {
      const r = await call('GET', `/prompt-logs/${id}`, { key: management });
      return r.status === 200 && r.json.data;
    });
    expect(log.response).toContain('data: ');
    expect(log.response).toContain('"content":"stream "');
    expect(log.response).toContain('[DONE]');
  });

  it('lists newest first, deletes one, then purges all for good', async () => {
    await client.embeddings.create({ model: 'sim/embed', input: 'embed me' });
    await until('three logs', async () => (await logs()).length === 3);
    const listed = await logs();
    const one = await call('DELETE', `/prompt-logs/${listed[0].generation_id}`, { key: management });
    expect(one.status).toBe(200);
    expect((await call('GET', `/prompt-logs/${listed[0].generation_id}`, { key: management })).status).toBe(404);
    expect((await call('DELETE', `/prompt-logs/${listed[0].generation_id}`, { key: management })).status).toBe(404);
    const all = await call('DELETE', '/prompt-logs', { key: management });
    expect(all.json).toEqual({ deleted: 2 });
    expect(await rows()).toEqual([]);
  });

  it('hides logs once their retention is over, and the sweeper deletes them', async () => {
    const completion = await client.chat.completions.create({ model: 'sim/echo', messages: [{ role: 'user', content: 'short-lived' }] });
    await until('the log', async () => (await logs()).some((l) => l.generation_id === completion.id));
    clock.advance(2 * 24 * 3600_000 - 1000);
    expect((await call('GET', `/prompt-logs/${completion.id}`, { key: management })).status).toBe(200);
    clock.advance(1000);
    expect((await call('GET', `/prompt-logs/${completion.id}`, { key: management })).status).toBe(404);
    expect(await logs()).toEqual([]);
    expect((await rows()).length).toBe(1);
    expect(await gw.background.purgePromptLogs()).toBe(1);
    expect(await rows()).toEqual([]);
  });

  it('off again: nothing new is kept', async () => {
    expect((await setLogging({ enabled: false })).json.data.prompt_logging).toEqual({ enabled: false, retention_days: 2 });
    await client.chat.completions.create({ model: 'sim/echo', messages: [{ role: 'user', content: 'after turning off' }] });
    await sleep(300);
    expect(await rows()).toEqual([]);
  });

  it('is read with a management key only', async () => {
    expect((await call('GET', '/prompt-logs', { key: gw.keys.api_key })).status).toBe(403);
  });
});
