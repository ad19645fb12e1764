import type OpenAI from 'openai';
import { startWithClient, stopGateway, type StartedGateway } from '../support/gateway';

/**
 * Issue 15.8: the simulated upstream honours what its catalog advertises, so what a user tries
 * through the gateway with the official SDK behaves as with a real model: `stop` ends the text,
 * `response_format` gives JSON (an instance of the schema for `json_schema`, so `parse()`
 * works), and a stream whose reasoning is excluded sends no empty chunks.
 */
describe('the simulated model honours stop, response_format and excluded reasoning', () => {
  let gw: StartedGateway;
  let client: OpenAI;

  beforeAll(async () => {
    ({ gw, client } = await startWithClient());
  }, 60_000);
  afterAll(() => stopGateway(gw));

  it('ends the text before the first stop sequence', async () => {
    const r = await client.chat.completions.create({
      model: 'sim/echo',
      messages: [{ role: 'user', content: 'one two three four' }],
      stop: [' three', 'four'],
    });
    expect(r.choices[0].message.content).toBe('Echo: one two');
    expect(r.choices[0].finish_reason).toBe('stop');
    // Billed for what was returned: the cut text.
    expect(r.usage!.completion_tokens).toBeLessThan(
      (await client.chat.completions.create({ model: 'sim/echo', messages: [{ role: 'user', content: 'one two three four' }] })).usage!.completion_tokens,
    );
  });

  it('answers a json_schema request with an instance of the schema, which parse() returns', async () => {
    const r = await client.chat.completions.parse({
      model: 'sim/echo',
      messages: [{ role: 'user', content: 'Paris' }],
      response_format: {
        type: 'json_schema',
        json_schema: {
          name: 'city',
          strict: true,
          schema: {
            type: 'object',
            properties: {
              name: { type: 'string' },
              population: { type: 'integer', minimum: 1 },
              capital: { type: 'boolean' },
              tags: { type: 'array', items: { type: 'string' }, minItems: 1 },
              kind: { type: 'string', enum: ['city', 'town'] },
            },
            required: ['name', 'population', 'capital', 'tags', 'kind'],
            additionalProperties: false,
          },
        },
      },
    });
    expect(r.choices[0].message.parsed).toEqual({ name: 'Echo: Paris', population: 1, capital: true, tags: ['Echo: Paris'], kind: 'city' });
  });

  it('answers a json_object request with a JSON object', async () => {
    const r = await client.chat.completions.create({
      model: 'sim/echo',
      messages: [{ role: 'user', content: 'hi' }],
      response_format: { type: 'json_object' },
    });
    expect(JSON.parse(r.choices[0].message.content!)).toEqual({ answer: 'Echo: hi' });
  });

  it('streams no empty chunk when the reasoning is excluded, and still bills it', async () => {
    const stream = await client.chat.completions.create({
      model: 'sim/echo',
      messages: [{ role: 'user', content: 'think first\n#sim {"reasoning_tokens": 6}' }],
      stream: true,
      stream_options: { include_usage: true },
      reasoning: { exclude: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const withChoices = chunks.filter((c) => c.choices.length > 0);
    expect(withChoices.filter((c) => c.choices.every((choice) => choice.finish_reason === null && Object.keys(choice.delta).length === 0))).toEqual([]);
    expect(withChoices.map((c) => c.choices[0].delta.content ?? '').join('')).toBe('Echo: think first');
    expect(chunks.at(-1)!.usage!.completion_tokens_details!.reasoning_tokens).toBe(6);
  });
});
