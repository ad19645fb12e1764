import OpenAI from 'openai';
import { startWithClient, stopGateway, type Call, type StartedGateway } from '../support/gateway';
import { creditsOf, expectBilled, generationOf, rawStream, rejectionOf } from '../support/interfaces';

const ENDPOINT = '/v1/completions';

type Costed = { cost: number };

/** Issue 7, spec 4.6: legacy text completions through the chat pipeline, with the official openai SDK. */
describe('POST /v1/completions with the official openai SDK', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;
  let key: string;

  beforeAll(async () => {
    ({ gw, client, call } = await startWithClient());
    key = gw.keys.api_key;
  }, 60_000);
  afterAll(() => stopGateway(gw));

  it('completes a prompt, billed exactly usage.cost', async () => {
    const before = await creditsOf(call, key);
    const { data: completion, response } = await client.completions.create({ model: 'sim/echo', prompt: 'Say this is a test', max_tokens: 32 }).withResponse();
    expect(completion).toMatchObject({
      object: 'text_completion',
      model: 'sim/echo',
      choices: [{ index: 0, text: 'Echo: Say this is a test', finish_reason: 'stop', logprobs: null }],
    });
    expect(completion.id).toMatch(/^gen-/);
    expect(response.headers.get('x-svc-generation-id')).toBe(completion.id);
    const usage = completion.usage as OpenAI.CompletionUsage & Costed;
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    await expectBilled(call, key, completion.id, usage.cost, ENDPOINT, before);
    expect(await generationOf(call, key, completion.id)).toMatchObject({ tokens_prompt: usage.prompt_tokens, tokens_completion: usage.completion_tokens });
  });

  it('echoes the prompt before the completion with echo: true', async () => {
    const completion = await client.completions.create({ model: 'sim/echo', prompt: 'Once upon a time', echo: true, max_tokens: 32 });
    const text = completion.choices[0].text;
    expect(text.startsWith('Once upon a time')).toBe(true);
    expect(text).toBe('Once upon a timeEcho: Once upon a time');
  });

  it('stops at max_tokens (16 when unset, as the legacy endpoint does) with finish_reason length', async () => {
    const completion = await client.completions.create({ model: 'sim/echo', prompt: 'Write a lot\n#sim {"completion_tokens": 40}' });
    expect(completion.usage?.completion_tokens).toBe(16);
    expect(completion.choices[0].finish_reason).toBe('length');
  });

  it('streams text_completion chunks with echo, the usage chunk with cost when asked, then [DONE]', async () => {
    const before = await creditsOf(call, key);
    const stream = await client.completions.create({
      model: 'sim/echo',
      prompt: 'Stream it',
      echo: true,
      max_tokens: 32,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const text = chunks.flatMap((c) => c.choices.map((choice) => choice.text)).join('');
    expect(text).toBe('Stream itEcho: Stream it');
    expect(chunks[0].choices[0].text.startsWith('Stream it')).toBe(true);
    for (const chunk of chunks) expect(chunk).toMatchObject({ object: 'text_completion', model: 'sim/echo', id: chunks[0].id });
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    const usage = last.usage as OpenAI.CompletionUsage & Costed;
    expect(usage.completion_tokens).toBeGreaterThan(0);
    expect(chunks.at(-2)!.choices[0].finish_reason).toBe('stop');
    await expectBilled(call, key, last.id, usage.cost, ENDPOINT, before);
  });

  it('a raw stream without include_usage has no usage chunk and ends with [DONE]', async () => {
    const { headers, frames } = await rawStream(gw.url, '/completions', key, { model: 'sim/echo', prompt: 'Raw', stream: true });
    expect(frames.at(-1)!.data).toBe('[DONE]');
    const chunks = frames.slice(0, -1).map((f) => f.data);
    for (const chunk of chunks) expect(chunk.choices).toHaveLength(1);
    expect(chunks.map((c) => c.choices[0].text).join('')).toBe('Echo: Raw');
    expect(chunks[0].id).toBe(headers.get('x-svc-generation-id'));
    // Still billed, though the client saw no usage.
    expect((await generationOf(call, key, chunks[0].id)).total_cost).toBeGreaterThan(0);
  });

  describe('bad input: 400 naming the field, nothing billed', () => {
    it.each<[string, unknown, string | null]>([
      ['a missing model', { prompt: 'hi' }, 'model'],
      ['a missing prompt', { model: 'sim/echo' }, 'prompt'],
      ['a batch of prompts', { model: 'sim/echo', prompt: ['a', 'b'] }, 'prompt'],
      ['max_tokens 0', { model: 'sim/echo', prompt: 'hi', max_tokens: 0 }, 'max_tokens'],
      ['a body that is an array', [{ model: 'sim/echo' }], null],
      ['a body that is null', null, null],
    ])('%s', async (_, body, param) => {
      const before = await creditsOf(call, key);
      const r = await call('POST', '/completions', { key, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
      expect(r.json.error.message).toContain(param ?? 'JSON object');
      expect(await creditsOf(call, key)).toEqual(before);
    });

    it('through the SDK too', async () => {
      const err = await rejectionOf(client.completions.create({ model: 'sim/echo' } as OpenAI.CompletionCreateParamsNonStreaming), OpenAI.BadRequestError);
      expect(err.param).toBe('prompt');
    });
  });
});
