import { randomBytes } from 'node:crypto';
import { api, freshPgSchemaUrl, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';

/**
 * Issue 41 S4, spec 2.5 and 4.18: a preset's system prompt is sealed at rest under
 * SVC_ENCRYPTION_KEY. Read straight from PostgreSQL (the event store and both read models):
 * the prompt text is in none of them; the presets API still shows it, a request still gets it,
 * and saving the same prompt again adds no version.
 */
describe('preset system prompts are sealed at rest (issue 41 S4)', () => {
  let gw: StartedGateway;
  let call: Call;
  let management: string;
  const prompt = `Always mention the word narwhal-${randomBytes(6).toString('hex')}.`;

  beforeAll(async () => {
    gw = await startGateway({ DATABASE_URL: await freshPgSchemaUrl('presets_sealed') });
    call = api(gw.url);
    management = gw.keys.management_key;
  }, 90_000);
  afterAll(async () => {
    await stopGateway(gw);
  });

  it('keeps the prompt out of the events and read models, and still shows and applies it', async () => {
    const created = await call('POST', '/presets', { key: management, body: { slug: 'sealed', config: { model: 'sim/echo', system_prompt: prompt } } });
    expect(created.status).toBe(201);
    expect(created.json.data.config).toEqual({ model: 'sim/echo', system_prompt: prompt });

    const marker = prompt.slice(-20);
    const stored = await gw.runtime.sql.query<{ where: string; value: string }>(
      `SELECT 'events' AS where, data::text AS value FROM events WHERE stream LIKE 'preset-%sealed'
       UNION ALL SELECT 'presets', config::text FROM presets WHERE slug = 'sealed'
       UNION ALL SELECT 'preset_versions', config::text FROM preset_versions WHERE slug = 'sealed'`,
    );
    expect(stored.rows.map((r) => r.where).sort()).toEqual(['events', 'preset_versions', 'presets']);
    for (const row of stored.rows) {
      expect(row.value).not.toContain(marker);
      expect(row.value).toContain('system_prompt_sealed');
    }

    const read = await call('GET', '/presets/sealed', { key: gw.keys.api_key });
    expect(read.json.data.config.system_prompt).toBe(prompt);
    expect(read.json.data.versions[0].config.system_prompt).toBe(prompt);

    // The model got the prompt in plaintext: exactly the tokens of the same request carrying it
    // itself (the sealed text would count many more).
    const chat = await call('POST', '/chat/completions', {
      key: gw.keys.api_key,
      body: { model: '@preset/sealed', messages: [{ role: 'user', content: 'hello' }] },
    });
    expect(chat.status).toBe(200);
    const direct = await call('POST', '/chat/completions', {
      key: gw.keys.api_key,
      body: {
        model: 'sim/echo',
        messages: [
          { role: 'system', content: prompt },
          { role: 'user', content: 'hello' },
        ],
      },
    });
    expect(chat.json.usage.prompt_tokens).toBe(direct.json.usage.prompt_tokens);

    // The same config again is no new version, although each seal is different.
    const same = await call('PATCH', '/presets/sealed', { key: management, body: { slug: 'sealed', config: { model: 'sim/echo', system_prompt: prompt } } });
    expect(same.status).toBe(200);
    expect(same.json.data.version).toBe(1);
    const changed = await call('PATCH', '/presets/sealed', {
      key: management,
      body: { slug: 'sealed', config: { model: 'sim/echo', system_prompt: `${prompt} Twice.` } },
    });
    expect(changed.json.data.version).toBe(2);
    expect(changed.json.data.config.system_prompt).toBe(`${prompt} Twice.`);
  });
});
