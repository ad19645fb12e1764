import 'reflect-metadata';
import { bodyValidation, fastBodyValidation } from '@svc/platform';
import { ChatCompletionRequest, isSurelyValidChatRequest } from './chat-completion.request';

const metadata = { type: 'body' as const, metatype: ChatCompletionRequest, data: undefined };
const full = bodyValidation();

/** What class-validator, as the routes ran it before the fast path, says of `body`: null when it passes. */
async function classValidatorError(body: unknown): Promise<unknown> {
  try {
    await full.transform(body, metadata);
    return null;
  } catch (error) {
    return error;
  }
}

/** A small seeded generator, so a failure can be replayed. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const VALUES: unknown[] = [
  null,
  '',
  'x',
  'gpt-4o',
  'none',
  'auto',
  'required',
  'low',
  'minimal',
  'text',
  'content',
  0,
  1,
  2,
  -1,
  -2.5,
  0.5,
  1.5,
  2.5,
  20,
  21,
  129,
  2 ** 53,
  Number.NaN,
  true,
  false,
  [],
  ['a'],
  ['a', 'b'],
  ['a', 'b', 'c'],
  ['a', 'b', 'c', 'd', 'e'],
  [1],
  ['text', 'image'],
  ['video'],
  {},
  { include_usage: true },
  { type: 'content', content: 'x' },
  { type: 'function', function: { name: 'f' } },
  { type: 'function', function: { name: '' } },
  [{ type: 'function', function: { name: 'f' } }],
  [{ type: 'function', function: { name: 'f', parameters: 'no' } }],
  { effort: 'low' },
  { effort: 'extreme' },
  { max_tokens: -1 },
  { type: 'json_object' },
  { type: 'json_schema', json_schema: { name: 's' } },
  { type: 'json_schema' },
  { '50': 10 },
  { '50': 101 },
  { x: 1 },
  [{ id: 'w' }],
];
const CONTENTS: unknown[] = [
  'hi',
  '',
  null,
  [],
  [{ type: 'text', text: 'a' }],
  [{ type: 'text', text: 1 }],
  [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }],
  [{ type: 'image_url', image_url: 'u' }],
  [{ type: 'file', file: { file_data: 'data:application/pdf;base64,AAAA' } }],
  [{ type: 'file', file: { file_id: 'f' } }],
  [{ type: 'bad' }],
  5,
  {},
  [null],
];
const ROLES: unknown[] = ['system', 'developer', 'user', 'assistant', 'tool', 'function', 'bogus', '', 3, null];
const TOOL_CALLS: unknown[] = [
  [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
  [{ id: 'c', function: { name: 'f' } }],
  [],
  'x',
  [null],
];
const FIELDS = [
  'model',
  'messages',
  'models',
  'max_tokens',
  'max_completion_tokens',
  'n',
  'stream',
  'stream_options',
  'safety_identifier',
  'user',
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'seed',
  'stop',
  'logit_bias',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'response_format',
  'reasoning',
  'reasoning_effort',
  'include_reasoning',
  'logprobs',
  'top_logprobs',
  'prompt_cache_key',
  'modalities',
  'provider',
  'prediction',
  'plugins',
  'transforms',
  'unknown_field',
  'constructor',
  'toString',
  'hasOwnProperty',
];

function message(next: () => number): Record<string, unknown> {
  const pick = <T>(from: readonly T[]) => from[Math.floor(next() * from.length)];
  const m: Record<string, unknown> = { role: pick(['user', 'assistant', 'system']), content: 'hello' };
  for (let i = Math.floor(next() * 3); i > 0; i--) {
    const field = pick(['role', 'content', 'name', 'tool_calls', 'tool_call_id', 'extra', 'toString']);
    if (next() < 0.1) delete m[field];
    else m[field] = field === 'role' ? pick(ROLES) : field === 'content' ? pick(CONTENTS) : field === 'tool_calls' ? pick(TOOL_CALLS) : pick(VALUES);
  }
  return m;
}

function body(next: () => number): unknown {
  const pick = <T>(from: readonly T[]) => from[Math.floor(next() * from.length)];
  if (next() < 0.02) return pick([null, 'text', [], 5]);
  const b: Record<string, unknown> = { model: 'sim/echo', messages: [message(next)] };
  for (let i = Math.floor(next() * 4); i > 0; i--) {
    const field = pick(FIELDS);
    if (next() < 0.1) delete b[field];
    else if (field === 'messages') b[field] = pick([[], [message(next), message(next)], 'x', [null], [[]]]);
    else b[field] = pick(VALUES);
  }
  return b;
}

describe('the chat request fast path (isSurelyValidChatRequest)', () => {
  /** Asserts the fast path passes `candidate` only if class-validator does; true when class-validator passes it. */
  async function agrees(candidate: unknown): Promise<{ valid: boolean; surely: boolean }> {
    const error = await classValidatorError(candidate);
    const surely = isSurelyValidChatRequest(candidate);
    if (surely && error !== null)
      throw new Error(`passed by the fast path, refused by class-validator (${(error as Error).message}): ${JSON.stringify(candidate)}`);
    return { valid: error === null, surely };
  }

  it('passes only bodies class-validator passes: every field and message field set to each of many values', async () => {
    const base = () => ({ model: 'sim/echo', messages: [{ role: 'user', content: 'hello' }] as Array<Record<string, unknown>> });
    let valid = 0;
    let surely = 0;
    const count = (r: { valid: boolean; surely: boolean }) => {
      valid += Number(r.valid);
      surely += Number(r.surely);
    };
    for (const field of FIELDS) for (const value of VALUES) count(await agrees({ ...base(), [field]: value }));
    for (const field of ['role', 'content', 'name', 'tool_calls', 'tool_call_id', 'extra', 'toString']) {
      for (const value of [...VALUES, ...CONTENTS, ...ROLES, ...TOOL_CALLS]) {
        const b = base();
        b.messages[0][field] = value;
        count(await agrees(b));
      }
    }
    expect(valid).toBeGreaterThan(500);
    expect(surely).toBeGreaterThan(valid / 2);
  });

  it('passes only bodies class-validator passes, over 4,000 bodies with several fields varied at once', async () => {
    const next = random(24);
    let valid = 0;
    for (let i = 0; i < 4_000; i++) valid += Number((await agrees(body(next))).valid);
    // The generator makes both kinds in numbers.
    expect(valid).toBeGreaterThan(400);
    expect(valid).toBeLessThan(3_600);
  });

  it('passes the requests SDKs send most: plain chat, streamed with usage, tools, images, a tool-calling assistant turn', () => {
    const bodies = [
      { model: 'sim/echo', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 },
      {
        model: 'openai/gpt-4o',
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi' },
        ],
        stream: true,
        stream_options: { include_usage: true },
        temperature: 0.2,
      },
      {
        model: 'm',
        messages: [{ role: 'user', content: 'weather?' }],
        tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }],
        tool_choice: 'auto',
      },
      {
        model: 'm',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'what is this?' },
              { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            ],
          },
        ],
      },
      {
        model: 'm',
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        ],
      },
      { model: 'm', messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_object' }, plugins: [{ id: 'response-healing' }] },
    ];
    for (const b of bodies) expect(isSurelyValidChatRequest(b)).toBe(true);
  });

  it('leaves to class-validator what it must explain: a wrong field still gets its 400 naming it', async () => {
    const pipe = fastBodyValidation(isSurelyValidChatRequest);
    const wrong = { model: 'm', messages: [{ role: 'bogus', content: 'hi' }] };
    expect(isSurelyValidChatRequest(wrong)).toBe(false);
    await expect(Promise.resolve().then(() => pipe.transform(wrong, metadata))).rejects.toMatchObject({ param: 'messages[0].role' });
    const fine = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    expect(await pipe.transform(fine, metadata)).toBe(fine);
  });

  it('does not take a name inherited from Object.prototype for a field it knows', () => {
    expect(isSurelyValidChatRequest({ model: 'm', messages: [{ role: 'user', content: 'hi' }], toString: 1 })).toBe(false);
    expect(isSurelyValidChatRequest({ model: 'm', messages: [{ role: 'user', content: 'hi', constructor: 'x' }] })).toBe(false);
  });
});
