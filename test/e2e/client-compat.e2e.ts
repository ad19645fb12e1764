import Anthropic from '@anthropic-ai/sdk';
import { jsonSchemaOutputFormat } from '@anthropic-ai/sdk/helpers/json-schema';
import OpenAI, { toFile } from 'openai';
import { tone, wav } from '@svc/providers';
import { api, startGateway, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { accountWithKey, creditsOf, expectBilled, generationOf, rawStream } from '../support/interfaces';
import { until } from '../support/until';

/**
 * Issue 41, compatibility items: what clients people already use send, and what they expect
 * back, through the official SDKs against a running gateway.
 */
describe('clients people already use (issue 41)', () => {
  let gw: StartedGateway;
  let call: Call;
  let key: string;
  let openai: OpenAI;
  let anthropic: Anthropic;

  /** The gateway's clock: the system's, moved forward by hand where a test needs time to pass. */
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs) };

  beforeAll(async () => {
    gw = await startGateway({}, undefined, { clock });
    call = api(gw.url);
    key = gw.keys.api_key;
    openai = new OpenAI({ baseURL: gw.url, apiKey: key, maxRetries: 0 });
    // The Anthropic SDK adds /v1/messages itself.
    anthropic = new Anthropic({ baseURL: gw.url.replace(/\/v1$/, ''), apiKey: key, maxRetries: 0 });
  }, 60_000);
  afterAll(() => stopGateway(gw));

  /** A WAV the simulated transcriber reads `text` from. */
  const recording = (seconds: number, text: string) => Buffer.concat([wav(tone(24_000 * seconds)), Buffer.from(`\n#sim-text ${text}\n`)]);
  const received = () => gw.runtime.simulator!.received as Array<Record<string, any>>;

  describe('issue 41 item 1: OpenRouter usage accounting (`usage: {include: true}`)', () => {
    it('a stream with usage.include ends with the usage chunk and its cost (spec 4.2), as include_usage does; `usage` is consumed, not ignored nor sent upstream', async () => {
      const before = await creditsOf(call, key);
      const { headers, frames } = await rawStream(gw.url, '/chat/completions', key, {
        model: 'sim/echo',
        messages: [{ role: 'user', content: 'count me' }],
        stream: true,
        usage: { include: true },
      });
      const chunks = frames.map((f) => f.data);
      expect(chunks.at(-1)).toBe('[DONE]');
      const last = chunks.at(-2) as { id: string; choices: unknown[]; usage: { completion_tokens: number; cost: number } };
      expect(last.choices).toEqual([]);
      expect(last.usage.completion_tokens).toBeGreaterThan(0);
      await expectBilled(call, key, last.id, last.usage.cost, '/v1/chat/completions', before);
      // As with include_usage (OpenAI's convention): every other chunk says `usage: null`.
      expect(chunks.slice(0, -2).every((c) => (c as { usage: unknown }).usage === null)).toBe(true);
      expect(headers.get('x-svc-ignored-params')).toBeNull();
      expect(received().at(-1)).not.toHaveProperty('usage');
    });

    it('a non-streamed answer with usage.include has its usage and cost, and `usage` is not reported as ignored', async () => {
      const { data, response } = await openai.chat.completions
        .create({
          model: 'sim/echo',
          messages: [{ role: 'user', content: 'count me too' }],
          usage: { include: true },
        } as OpenAI.ChatCompletionCreateParamsNonStreaming)
        .withResponse();
      const usage = data.usage as OpenAI.CompletionUsage & { cost: number };
      expect(usage.cost).toBe((await generationOf(call, key, data.id)).total_cost);
      expect(response.headers.get('x-svc-ignored-params')).toBeNull();
      expect(received().at(-1)).not.toHaveProperty('usage');
    });
  });
  describe('issue 41 item 3: a matched stop sequence on /v1/messages (spec 4.3 `stop_sequences`)', () => {
    // 'four' is listed first, ' three' comes first in the text: the text's first match ends it.
    const params = { max_tokens: 64, stop_sequences: ['four', ' three'], messages: [{ role: 'user' as const, content: 'one two three four' }] };

    it.each(['sim/echo', 'sim/claude-echo'])(
      '%s: stop_reason "stop_sequence" with the matched text, non-streamed and in message_delta; end_turn without a match',
      async (model) => {
        const message = await anthropic.messages.create({ model, ...params });
        expect(message).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: ' three', content: [{ type: 'text', text: 'Echo: one two' }] });

        const { frames } = await rawStream(gw.url, '/messages', key, { model, ...params, stream: true });
        const deltas = frames.filter((f) => f.event === 'message_delta');
        expect(deltas.map((f) => f.data.delta)).toEqual([{ stop_reason: 'stop_sequence', stop_sequence: ' three' }]);
        const streamed = await anthropic.messages.stream({ model, ...params }).finalMessage();
        expect(streamed).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: ' three' });

        const unmatched = await anthropic.messages.create({ model, ...params, stop_sequences: ['zebra'] });
        expect(unmatched).toMatchObject({ stop_reason: 'end_turn', stop_sequence: null, content: [{ type: 'text', text: 'Echo: one two three four' }] });
      },
    );
  });
  describe('issue 41 item 2: structured outputs on /v1/messages (`output_config.format` json_schema)', () => {
    const schema = {
      type: 'object',
      properties: { city: { type: 'string' }, population: { type: 'integer', minimum: 1 }, tags: { type: 'array', items: { type: 'string' }, minItems: 1 } },
      required: ['city', 'population', 'tags'],
      additionalProperties: false,
    } as const;

    it.each(['sim/echo', 'sim/claude-echo'])(
      '%s: the official SDK parse() gets JSON of the schema, streamed or not; the schema reached the upstream in its format',
      async (model) => {
        const params = {
          model,
          max_tokens: 256,
          messages: [{ role: 'user' as const, content: 'Paris' }],
          output_config: { format: jsonSchemaOutputFormat(schema) },
        };
        const message = await anthropic.messages.parse(params);
        // The SDK moves constraints Anthropic does not enforce (minimum) into descriptions: population is just an integer.
        expect(message.parsed_output).toEqual({ city: 'Echo: Paris', population: 0, tags: ['Echo: Paris'] });
        const sent = params.output_config.format.schema;
        const upstream = received().at(-1)!;
        if (model === 'sim/echo')
          expect(upstream.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'output', schema: sent, strict: true } });
        else expect(upstream.output_config).toEqual({ format: { type: 'json_schema', schema: sent } });

        const streamed = await anthropic.messages.stream(params).finalMessage();
        expect(JSON.parse((streamed.content[0] as Anthropic.TextBlock).text)).toEqual(message.parsed_output);
      },
    );

    it("the beta's top-level output_format is read the same way; output_config.effort is reported ignored", async () => {
      const r = await call('POST', '/messages', {
        key,
        body: {
          model: 'sim/echo',
          max_tokens: 256,
          messages: [{ role: 'user', content: 'Oslo' }],
          output_format: { type: 'json_schema', schema },
          output_config: { effort: 'low' },
        },
      });
      expect(r.status).toBe(200);
      expect(JSON.parse(r.json.content[0].text)).toEqual({ city: 'Echo: Oslo', population: 1, tags: ['Echo: Oslo'] });
      expect(r.headers.get('x-svc-ignored-params')).toBe('output_config.effort');
    });

    it("a malformed format is a 400 in Anthropic's shape naming the field", async () => {
      const r = await call('POST', '/messages', {
        key,
        body: { model: 'sim/echo', max_tokens: 16, messages: [{ role: 'user', content: 'x' }], output_config: { format: { type: 'json_schema' } } },
      });
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', param: 'output_config.format.schema' } });
    });
  });
  describe('issue 41 item 4: every billed answer carries id, model and usage.cost in its body (spec 1 rule 2)', () => {
    it.each(['transcriptions', 'translations'] as const)(
      "/v1/audio/%s: json and verbose_json bodies carry them beside the model's usage; srt stays the subtitle file, headers only",
      async (task) => {
        const create = async (format: 'json' | 'verbose_json' | 'srt') =>
          (task === 'transcriptions' ? openai.audio.transcriptions : openai.audio.translations)
            .create({
              file: await toFile(recording(2, 'One sentence. Another one.'), 'two.wav', { type: 'audio/wav' }),
              model: 'sim/whisper',
              response_format: format,
            } as never)
            .withResponse();
        for (const format of ['json', 'verbose_json'] as const) {
          const { data, response } = await create(format);
          const body = data as unknown as { id: string; model: string; text: string; usage: { type: string; seconds: number; cost: number } };
          expect(body.id).toBe(response.headers.get('x-svc-generation-id'));
          expect(body).toMatchObject({
            model: 'sim/whisper',
            text: 'One sentence. Another one.',
            usage: { type: 'duration', seconds: 2, cost: Number(response.headers.get('x-svc-cost')) },
          });
          expect(body.usage.cost).toBe((await generationOf(call, key, body.id)).total_cost);
        }
        const { data: srt, response } = await create('srt');
        expect(srt).toMatch(/^1\n00:00:00,000 --> /);
        expect(response.headers.get('x-svc-generation-id')).toMatch(/^gen-/);
      },
    );

    it('/v1/responses names the provider that answered, as a chat completion does, streamed or not, and kept with the stored response', async () => {
      const chat = await openai.chat.completions.create({ model: 'sim/echo', messages: [{ role: 'user', content: 'hi' }] });
      expect((chat as unknown as { provider: string }).provider).toBe('sim');
      const response = await openai.responses.create({ model: 'sim/echo', input: 'hi' });
      expect((response as unknown as { provider: string }).provider).toBe('sim');
      expect(((await openai.responses.retrieve(response.id)) as unknown as { provider: string }).provider).toBe('sim');
      const events = await openai.responses.create({ model: 'sim/claude-echo', input: 'hi', stream: true });
      let completed: unknown = null;
      for await (const event of events) if (event.type === 'response.completed') completed = event.response;
      expect((completed as { provider: string }).provider).toBe('sim-anthropic');
    });
  });
  describe('issue 41 item 6: a method a path does not serve is 405 with Allow (spec 2.1 error object)', () => {
    it.each([
      ['POST', '/models', 'GET, HEAD'],
      ['DELETE', '/chat/completions', 'POST'],
      ['PUT', '/keys', 'GET, HEAD, POST'],
      ['POST', '/videos/video_0123456789abcdef01234567/content', 'GET, HEAD'],
      // Fastify answers HEAD wherever GET is served, so Allow names it too.
    ])('%s %s: 405 method_not_allowed, Allow: %s', async (method, path, allow) => {
      const r = await call(method, path, { key, body: method === 'GET' ? undefined : {} });
      expect(r.status).toBe(405);
      expect(r.headers.get('allow')).toBe(allow);
      expect(r.json).toEqual({ error: { message: expect.stringContaining(allow), type: 'invalid_request_error', code: 'method_not_allowed', param: null } });
    });

    it("on /v1/messages the 405 is in Anthropic's shape; a path nothing serves stays 404", async () => {
      const messages = await call('GET', '/messages', { key });
      expect([messages.status, messages.headers.get('allow')]).toEqual([405, 'POST']);
      expect(messages.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', code: 'method_not_allowed' } });
      const unknown = await call('POST', '/no-such-thing', { key, body: {} });
      expect([unknown.status, unknown.json.error.code]).toEqual([404, 'route_not_found']);
    });
  });
  // Last: moves the gateway's clock.
  describe('issue 41 item 5: video content (spec 4.1 row and 4.15 "redirects to the MP4", 2.4 `url`)', () => {
    type Video = { id: string; status: string; url: string | null; thumbnail_url: string | null };
    let video: Video;
    let mp4: Buffer;

    beforeAll(async () => {
      const created = (await openai.videos.create({ model: 'sim/video', prompt: 'a kite', seconds: '4' } as never)) as unknown as Video;
      video = await until(
        `video ${created.id} to complete`,
        async () => {
          const polled = (await openai.videos.retrieve(created.id)) as unknown as Video;
          return polled.status === 'completed' ? polled : null;
        },
        25_000,
        150,
      );
    }, 30_000);
    afterAll(() => void (offsetMs = 0));

    it("`url` and `thumbnail_url` open without a key (a browser's <video src>); /content with a key redirects (302) to such a URL, which the SDK follows", async () => {
      const clip = await fetch(video.url!);
      expect([clip.status, clip.headers.get('content-type')]).toEqual([200, 'video/mp4']);
      mp4 = Buffer.from(await clip.arrayBuffer());
      expect(mp4.subarray(4, 8).toString('latin1')).toBe('ftyp');
      const poster = await fetch(video.thumbnail_url!);
      expect([poster.status, poster.headers.get('content-type')]).toEqual([200, 'image/jpeg']);

      const redirect = await fetch(`${gw.url}/videos/${video.id}/content`, { headers: { authorization: `Bearer ${key}` }, redirect: 'manual' });
      expect(redirect.status).toBe(302);
      const location = redirect.headers.get('location')!;
      expect(location).toMatch(new RegExp(`/v1/videos/${video.id}/file\\?`));
      expect(Buffer.from(await (await fetch(location)).arrayBuffer()).equals(mp4)).toBe(true);
      const thumb = await fetch(`${gw.url}/videos/${video.id}/content?variant=thumbnail`, { headers: { authorization: `Bearer ${key}` }, redirect: 'manual' });
      expect(new URL(thumb.headers.get('location')!).searchParams.get('variant')).toBe('thumbnail');
      expect(Buffer.from(await (await openai.videos.downloadContent(video.id)).arrayBuffer()).equals(mp4)).toBe(true);
      // Without a key /content itself is still refused.
      expect((await fetch(`${gw.url}/videos/${video.id}/content`, { redirect: 'manual' })).status).toBe(401);
    });

    it('a signed URL opens only its own file of its own workspace: altered, or asked for by another account, it is refused', async () => {
      const altered = (change: (q: URLSearchParams) => void) => {
        const url = new URL(video.url!);
        change(url.searchParams);
        return url.toString();
      };
      for (const url of [
        altered((q) => q.set('workspace', `${q.get('workspace')}x`)),
        altered((q) => q.set('expires', String(Number(q.get('expires')) + 3600))),
        altered((q) => q.set('variant', 'thumbnail')),
        altered((q) => q.delete('signature')),
        video.url!.replace(video.id, 'video_0123456789abcdef01234567'),
      ]) {
        const r = await fetch(url);
        expect([r.status, ((await r.json()) as { error: { code: string } }).error.code]).toEqual([403, 'content_url_invalid']);
      }
      const other = await accountWithKey(gw, 1);
      const refused = await call('GET', `/videos/${video.id}/content`, { key: other.key });
      expect([refused.status, refused.json.error.code]).toEqual([404, 'video_not_found']);
    });

    it("a signed URL expires after an hour by the gateway's clock; the video then gives a fresh one", async () => {
      offsetMs = 3_600_000 - 5_000;
      expect((await fetch(video.url!)).status).toBe(200);
      offsetMs = 3_600_000;
      const expired = await fetch(video.url!);
      expect([expired.status, ((await expired.json()) as { error: { code: string } }).error.code]).toEqual([403, 'content_url_expired']);
      const fresh = (await openai.videos.retrieve(video.id)) as unknown as Video;
      expect(fresh.url).not.toBe(video.url);
      expect(Buffer.from(await (await fetch(fresh.url!)).arrayBuffer()).equals(mp4)).toBe(true);
    });
  });
});
