/**
 * A model served through the Anthropic adapter (`sim/claude-echo`: the simulator's Messages
 * endpoint), called by the official openai SDK: the client sees the OpenAI format throughout,
 * and billing, tool calls and failures behave as for an OpenAI-compatible upstream.
 */
import OpenAI from 'openai';
import { usdToNano } from '@svc/platform';
import { countChatPromptTokens, countTextTokens } from '@svc/providers';
import { startWithClient, stopGateway, type StartedGateway, type Call } from '../support/gateway';

// The built-in catalog's sim/claude-echo prices ($3 / $15 / $0.30 per M), in nano-USD per token.
const INPUT = 3000n;
const OUTPUT = 15_000n;
const CACHED = 300n;
const MODEL = 'sim/claude-echo';

describe('chat completions through the Anthropic adapter (issue 5, provider adapters)', () => {
  let gw: StartedGateway;
  let client: OpenAI;
  let call: Call;

  beforeAll(async () => void ({ gw, client, call } = await startWithClient()), 60_000);
  afterAll(() => stopGateway(gw));

  const balanceNano = async () => usdToNano((await call('GET', '/credits', { key: gw.keys.api_key })).json.data.balance);
  const costNano = (usage: unknown) => usdToNano((usage as { cost: number }).cost);
  const user = (content: string) => [{ role: 'user' as const, content }];

  it('answers in the OpenAI format and bills exactly the catalog prices', async () => {
    const before = await balanceNano();
    const messages = [{ role: 'system' as const, content: 'Be brief.' }, ...user('Hello Claude')];
    const completion = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 64 });
    expect(completion).toMatchObject({ object: 'chat.completion', model: MODEL });
    expect(completion.choices[0]).toMatchObject({ message: { role: 'assistant', content: 'Echo: Hello Claude' }, finish_reason: 'stop' });
    const usage = completion.usage!;
    expect(usage.prompt_tokens).toBe(countChatPromptTokens(messages));
    expect(usage.completion_tokens).toBe(countTextTokens('Echo: Hello Claude'));
    const expected = BigInt(usage.prompt_tokens) * INPUT + BigInt(usage.completion_tokens) * OUTPUT;
    expect(costNano(usage)).toBe(expected);
    expect(before - (await balanceNano())).toBe(expected);
    const generation = (await call('GET', `/generation?id=${completion.id}`, { key: gw.keys.api_key })).json.data;
    expect(generation).toMatchObject({ model: MODEL, provider: 'sim-anthropic', status: 'completed' });
  });

  it('bills cache reads at the cached price and reports the thinking as reasoning', async () => {
    const before = await balanceNano();
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: user('Think about caching\n#sim {"cached_tokens": 8, "reasoning_tokens": 10}'),
      reasoning_effort: 'medium',
    });
    const usage = completion.usage!;
    expect(usage.prompt_tokens_details?.cached_tokens).toBe(8);
    expect(usage.completion_tokens_details?.reasoning_tokens).toBe(10);
    expect((completion.choices[0].message as unknown as { reasoning: string }).reasoning).toBe(`think${' think'.repeat(9)}`);
    const expected = BigInt(usage.prompt_tokens - 8) * INPUT + 8n * CACHED + BigInt(usage.completion_tokens) * OUTPUT;
    expect(costNano(usage)).toBe(expected);
    expect(before - (await balanceNano())).toBe(expected);
  });

  it('streams with include_usage: the same text, and the usage chunk carries the cost billed', async () => {
    const messages = user('Stream me please');
    const whole = await client.chat.completions.create({ model: MODEL, messages });
    const before = await balanceNano();
    const stream = await client.chat.completions.create({ model: MODEL, messages, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      expect(chunk.model).toBe(MODEL);
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect(text).toBe('Echo: Stream me please');
    expect(finish).toBe('stop');
    expect(usage).toMatchObject({ prompt_tokens: whole.usage!.prompt_tokens, completion_tokens: whole.usage!.completion_tokens });
    const expected = BigInt(usage!.prompt_tokens) * INPUT + BigInt(usage!.completion_tokens) * OUTPUT;
    expect(costNano(usage)).toBe(expected);
    expect(before - (await balanceNano())).toBe(expected);
  });

  it('returns tool calls as tool_calls, streamed or not, and takes the results back', async () => {
    const tools = [{ type: 'function' as const, function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const ask = user('Weather in Paris?\n#sim {"tool_call": {"name": "weather", "arguments": {"city": "Paris"}}}');
    const completion = await client.chat.completions.create({ model: MODEL, messages: ask, tools, tool_choice: 'auto' });
    expect(completion.choices[0].finish_reason).toBe('tool_calls');
    const call0 = completion.choices[0].message.tool_calls![0];
    expect(call0).toMatchObject({ id: expect.stringMatching(/^toolu_sim_/), type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } });

    const final = await client.chat.completions.stream({ model: MODEL, messages: ask, tools }).finalChatCompletion();
    expect(final.choices[0].finish_reason).toBe('tool_calls');
    expect(final.choices[0].message.tool_calls![0]).toMatchObject({ function: call0.type === 'function' ? call0.function : {} });

    // The round trip: the tool result goes back as a tool_result block and the model answers.
    const conversation: OpenAI.ChatCompletionMessageParam[] = [
      ...user('Weather in Paris?'),
      { role: 'assistant', content: null, tool_calls: [call0] },
      { role: 'tool', tool_call_id: call0.id, content: 'sunny' },
      ...user('Thanks!'),
    ];
    const answer = await client.chat.completions.create({ model: MODEL, messages: conversation, tools });
    expect(answer.choices[0].message.content).toBe('Echo: Thanks!');
    expect(answer.usage!.prompt_tokens).toBe(countChatPromptTokens(conversation));
  });

  /** The status and error body the client gets, and the balance change. */
  async function failing(model: string, text: string) {
    const before = await balanceNano();
    const error = await client.chat.completions.create({ model, messages: user(text) }).then(
      () => null,
      (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
    );
    return { status: error?.status, error: error?.error, charged: before - (await balanceNano()) };
  }

  it.each([529, 503])('maps an upstream %i as it does for an OpenAI-compatible upstream, and bills nothing', async (status) => {
    const anthropic = await failing(MODEL, `#sim {"fail": ${status}}`);
    const openai = await failing('sim/echo', `#sim {"fail": ${status}}`);
    expect(anthropic.status).toBe(openai.status);
    expect(anthropic.error).toEqual(openai.error);
    expect(anthropic.charged).toBe(0n);
  });

  it('falls back to another model when the Anthropic upstream is overloaded', async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      models: ['sim/echo'],
      messages: user(`Hi\n#sim {"fail_models": {"${MODEL}": 529}}`),
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(completion.model).toBe('sim/echo');
    expect(completion.choices[0].message.content).toBe('Echo: Hi');
  });
});
