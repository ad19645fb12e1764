/** The official `openai` SDK pointed at the simulator: proof that it speaks the real wire format. */
import OpenAI from 'openai';
import { countChatPromptTokens } from '../tokens';
import { startSimulator, type Simulator } from './server';

let sim: Simulator;
let client: OpenAI;
beforeAll(async () => {
  sim = await startSimulator();
  client = new OpenAI({ baseURL: sim.url, apiKey: 'sk-sim', maxRetries: 0 });
});
afterAll(() => sim.close());

const messages = (text: string) => [{ role: 'user' as const, content: text }];

it('creates a chat completion', async () => {
  const completion = await client.chat.completions.create({ model: 'sim/echo', messages: messages('Hello SDK') });
  expect(completion.choices[0].message.content).toBe('Echo: Hello SDK');
  expect(completion.usage?.prompt_tokens).toBe(countChatPromptTokens(messages('Hello SDK')));
});

it('streams a chat completion with usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'sim/echo',
    messages: messages('Hello stream\n#sim {"cached_tokens": 4}'),
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | null | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? '';
    usage = chunk.usage ?? usage;
  }
  expect(text).toBe('Echo: Hello stream');
  expect(usage?.prompt_tokens_details?.cached_tokens).toBe(4);
});

it("accumulates a streamed tool call with the SDK's stream helper", async () => {
  const runner = client.chat.completions.stream({
    model: 'sim/echo',
    messages: messages('#sim {"tool_call": {"name": "lookup", "arguments": {"q": "svc gateway", "limit": 3}}}'),
    tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
  });
  const final = await runner.finalChatCompletion();
  expect(final.choices[0].finish_reason).toBe('tool_calls');
  const call = final.choices[0].message.tool_calls?.[0];
  expect(call?.type === 'function' && call.function).toEqual({ name: 'lookup', arguments: '{"q":"svc gateway","limit":3}' });
});

it('raises APIError with the status, type and code of a simulated failure', async () => {
  const failing = client.chat.completions.create({ model: 'sim/echo', messages: messages('#sim {"fail": 503}') });
  await expect(failing).rejects.toBeInstanceOf(OpenAI.InternalServerError);
  await expect(failing).rejects.toMatchObject({ status: 503, type: 'api_error', code: 'sim_failure' });
});

it('raises AuthenticationError without a bearer token', async () => {
  const anonymous = new OpenAI({ baseURL: sim.url, apiKey: 'unused', defaultHeaders: { authorization: 'Basic abc' }, maxRetries: 0 });
  await expect(anonymous.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
});

it("creates embeddings in the SDK's default base64 encoding", async () => {
  const viaBase64 = await client.embeddings.create({ model: 'sim/embed', input: 'vector me' });
  const viaFloat = await client.embeddings.create({ model: 'sim/embed', input: 'vector me', encoding_format: 'float' });
  expect(viaBase64.data[0].embedding).toHaveLength(8);
  expect(viaBase64.data[0].embedding).toEqual(viaFloat.data[0].embedding);
});

it('lists the models', async () => {
  const ids: string[] = [];
  for await (const model of client.models.list()) ids.push(model.id);
  expect(ids).toEqual(['sim/echo', 'sim/small-8k', 'sim/embed']);
});
