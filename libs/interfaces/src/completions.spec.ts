import OpenAI from 'openai';
import { errorOf } from '@svc/platform/testing/errors';
import type { ChatCompletion } from '@svc/providers';
import { chatToCompletion, completionsOptions, completionsToChat, CompletionsStreamEncoder } from './completions';
import { chunk, parseFrames, USAGE, usageChunk } from './testing/sse';
import type { CostedUsage } from './types';

describe('completionsToChat', () => {
  it.each<[string, object, object]>([
    [
      'a string prompt as one user message, with the legacy default of 16 tokens',
      { model: 'gpt-3.5-turbo-instruct', prompt: 'Say this is a test' },
      { model: 'gpt-3.5-turbo-instruct', messages: [{ role: 'user', content: 'Say this is a test' }], max_tokens: 16 },
    ],
    ['an array of exactly one string', { model: 'm', prompt: ['Once'] }, { model: 'm', messages: [{ role: 'user', content: 'Once' }], max_tokens: 16 }],
    [
      'max_tokens, sampling fields and stop; echo, suffix, logprobs, n 1 and best_of 1 dropped',
      {
        model: 'm',
        prompt: 'p',
        max_tokens: 50,
        temperature: 0,
        top_p: 0.5,
        stop: ['\n'],
        echo: true,
        suffix: '!',
        logprobs: 2,
        n: 1,
        best_of: 1,
        seed: 7,
        user: 'u',
      },
      { model: 'm', messages: [{ role: 'user', content: 'p' }], max_tokens: 50, temperature: 0, top_p: 0.5, stop: ['\n'], seed: 7, user: 'u' },
    ],
    [
      'stream with the usage chunk the gateway bills from',
      { model: 'm', prompt: 'p', stream: true },
      { model: 'm', messages: [{ role: 'user', content: 'p' }], max_tokens: 16, stream: true, stream_options: { include_usage: true } },
    ],
  ])('translates %s', (_, body, expected) => {
    expect(completionsToChat(body)).toEqual(expected);
  });

  it.each<[string, unknown, string | null]>([
    ['a body that is not an object', null, null],
    ['no model', { prompt: 'p' }, 'model'],
    ['no prompt', { model: 'm' }, 'prompt'],
    ['a batch of prompts', { model: 'm', prompt: ['a', 'b'] }, 'prompt'],
    ['a token-array prompt', { model: 'm', prompt: [1, 2, 3] }, 'prompt'],
    ['an empty prompt array', { model: 'm', prompt: [] }, 'prompt'],
    ['max_tokens 0', { model: 'm', prompt: 'p', max_tokens: 0 }, 'max_tokens'],
    ['a numeric stop', { model: 'm', prompt: 'p', stop: 5 }, 'stop'],
    ['a string temperature', { model: 'm', prompt: 'p', temperature: 'warm' }, 'temperature'],
    ['n above 1 (one choice per request)', { model: 'm', prompt: 'p', n: 3 }, 'n'],
    ['best_of above 1', { model: 'm', prompt: 'p', best_of: 3 }, 'best_of'],
    // Issue 15.6: typed even where not carried over.
    ['a string echo', { model: 'm', prompt: 'p', echo: 'yes' }, 'echo'],
    ['a numeric suffix', { model: 'm', prompt: 'p', suffix: 5 }, 'suffix'],
    ['logprobs that are not 0 to 5', { model: 'm', prompt: 'p', logprobs: 'all' }, 'logprobs'],
  ])('refuses %s with a 400 naming the field', (_, body, param) => {
    const error = errorOf(() => completionsToChat(body));
    expect({ status: error.status, param: error.param }).toEqual({ status: 400, param });
  });

  it('reads the prompt, echo and the usage wish for the answer', () => {
    expect(completionsOptions({ model: 'm', prompt: ['p'], echo: true, stream_options: { include_usage: true } })).toEqual({
      prompt: 'p',
      echo: true,
      includeUsage: true,
    });
    expect(completionsOptions({ model: 'm', prompt: 'p' })).toEqual({ prompt: 'p', echo: false, includeUsage: false });
  });
});

const completion: ChatCompletion & { usage: CostedUsage } = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1700000000,
  model: 'gpt-x',
  choices: [{ index: 0, message: { role: 'assistant', content: ' a test.' }, finish_reason: 'length' }],
  usage: USAGE,
};

describe('chatToCompletion', () => {
  it.each<[boolean, string]>([
    [false, ' a test.'],
    [true, 'This is a test.'],
  ])('echo %s gives the text %j', (echo, text) => {
    expect(chatToCompletion(completion, { prompt: 'This is', echo })).toEqual({
      id: 'chatcmpl-1',
      object: 'text_completion',
      created: 1700000000,
      model: 'gpt-x',
      choices: [{ text, index: 0, logprobs: null, finish_reason: 'length' }],
      usage: USAGE,
    });
  });
});

const streamOptions = { id: 'cmpl-1', created: 1700000000, model: 'gpt-x', prompt: 'Count:', echo: false, includeUsage: true };

describe('CompletionsStreamEncoder', () => {
  it('(a) text: one text_completion chunk per delta, the finish chunk, the usage chunk, [DONE]', () => {
    const encoder = new CompletionsStreamEncoder(streamOptions);
    const frames = [
      ...[chunk({ role: 'assistant', content: '' }), chunk({ content: ' 1' }), chunk({ content: ' 2' }), chunk({}, 'stop'), usageChunk()].flatMap((c) =>
        encoder.chunk(c),
      ),
      ...encoder.finish(USAGE),
    ];
    expect(frames.every((f) => f.startsWith('data: ') && f.endsWith('\n\n') && !f.includes('event:'))).toBe(true);
    const data = parseFrames(frames).map((f) => f.data);
    const text = (t: string, finish: string | null) => ({
      id: 'cmpl-1',
      object: 'text_completion',
      created: 1700000000,
      model: 'gpt-x',
      choices: [{ text: t, index: 0, logprobs: null, finish_reason: finish }],
    });
    expect(data).toEqual([
      text(' 1', null),
      text(' 2', null),
      text('', 'stop'),
      { id: 'cmpl-1', object: 'text_completion', created: 1700000000, model: 'gpt-x', choices: [], usage: USAGE },
      '[DONE]',
    ]);
  });

  it('(b) echo: the first frame carries the prompt; no usage chunk unless asked', () => {
    const encoder = new CompletionsStreamEncoder({ ...streamOptions, echo: true, includeUsage: false });
    const frames = [...encoder.chunk(chunk({ content: ' 1' })), ...encoder.chunk(chunk({ content: ' 2' })), ...encoder.finish(USAGE)];
    expect(parseFrames(frames).map((f) => (f.data === '[DONE]' ? f.data : f.data.choices[0].text))).toEqual(['Count: 1', ' 2', '[DONE]']);
  });

  it('(c) echo with no text at all still sends the prompt before [DONE]', () => {
    const encoder = new CompletionsStreamEncoder({ ...streamOptions, echo: true, includeUsage: false });
    expect(parseFrames(encoder.finish(USAGE)).map((f) => (f.data === '[DONE]' ? f.data : f.data.choices[0].text))).toEqual(['Count:', '[DONE]']);
  });

  it('(d) an error mid-stream is a data frame with an error member', () => {
    const encoder = new CompletionsStreamEncoder(streamOptions);
    const frames = [
      ...encoder.chunk(chunk({ content: ' 1' })),
      ...encoder.error({ error: { message: 'boom', type: 'api_error', code: 'internal_error', param: null } }),
    ];
    expect(frames[1]).toBe('data: {"error":{"message":"boom","type":"api_error","code":"internal_error","param":null}}\n\n');
  });
});

function sdkServing(body: string, contentType: string): OpenAI {
  return new OpenAI({
    apiKey: 'sk-test',
    baseURL: 'http://gateway.test/v1',
    maxRetries: 0,
    fetch: async () => new Response(body, { status: 200, headers: { 'content-type': contentType } }),
  });
}

describe('the openai SDK reads what we write', () => {
  it('streams text and usage, and throws on an error frame', async () => {
    const encoder = new CompletionsStreamEncoder(streamOptions);
    const frames = [...encoder.chunk(chunk({ content: ' 1' })), ...encoder.chunk(chunk({}, 'stop')), ...encoder.finish(USAGE)];
    const stream = await sdkServing(frames.join(''), 'text/event-stream').completions.create({ model: 'gpt-x', prompt: 'Count:', stream: true });
    let text = '';
    let usage: unknown;
    for await (const part of stream) {
      text += part.choices[0]?.text ?? '';
      usage = part.usage ?? usage;
    }
    expect(text).toBe(' 1');
    expect(usage).toEqual(USAGE);

    const failing = new CompletionsStreamEncoder(streamOptions);
    const bad = [...failing.chunk(chunk({ content: ' 1' })), ...failing.error({ error: { message: 'boom', type: 'api_error' } })];
    const broken = await sdkServing(bad.join(''), 'text/event-stream').completions.create({ model: 'gpt-x', prompt: 'Count:', stream: true });
    await expect(
      (async () => {
        for await (const part of broken) void part;
      })(),
    ).rejects.toThrow('boom');
  });
});
