import Anthropic from '@anthropic-ai/sdk';
import { errorOf } from '@svc/platform/testing/errors';
import { countChatPromptTokens, countTextTokens } from '@svc/providers';
import type { ChatChunk, ChatCompletion } from '@svc/providers';
import { chatToMessage, countMessagesTokens, messagesToChat, MessagesStreamEncoder, toAnthropicError, type AnthropicMessage } from './messages';
import { chunk, parseFrames, USAGE, type ParsedFrame } from './testing/sse';
import type { CostedUsage } from './types';
import type { WebSearchRun } from './web-search';

const base = { model: 'claude-x', max_tokens: 256 };
const ask = (content: unknown) => ({ ...base, messages: [{ role: 'user', content }] });
const ephemeral = { type: 'ephemeral' };

describe('messagesToChat: translation', () => {
  it.each<[string, object, object]>([
    ['a string message', ask('hi'), { model: 'claude-x', max_tokens: 256, messages: [{ role: 'user', content: 'hi' }] }],
    [
      'a string system as a leading system message',
      { ...ask('hi'), system: 'Be brief.' },
      {
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hi' },
        ],
      },
    ],
    [
      'system text blocks, keeping cache_control',
      {
        ...ask('hi'),
        system: [
          { type: 'text', text: 'A' },
          { type: 'text', text: 'B', cache_control: ephemeral },
        ],
      },
      {
        messages: [
          {
            role: 'system',
            content: [
              { type: 'text', text: 'A' },
              { type: 'text', text: 'B', cache_control: ephemeral },
            ],
          },
          { role: 'user', content: 'hi' },
        ],
      },
    ],
    [
      'a single plain text block as a string, text blocks with cache_control as parts',
      {
        ...base,
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'one' }] },
          { role: 'assistant', content: 'ok' },
          { role: 'user', content: [{ type: 'text', text: 'two', cache_control: ephemeral }] },
        ],
      },
      {
        messages: [
          { role: 'user', content: 'one' },
          { role: 'assistant', content: 'ok' },
          { role: 'user', content: [{ type: 'text', text: 'two', cache_control: ephemeral }] },
        ],
      },
    ],
    [
      'base64 and url images as image_url parts',
      ask([
        { type: 'text', text: 'Compare' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0=' } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
      ]),
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Compare' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0=' } },
              { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
            ],
          },
        ],
      },
    ],
    [
      'a base64 PDF as a file part and a text document as text',
      ask([
        { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' }, title: 'spec.pdf', cache_control: ephemeral },
        { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'plain words' } },
      ]),
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'file', file: { filename: 'spec.pdf', file_data: 'data:application/pdf;base64,JVBERi0=' }, cache_control: ephemeral },
              { type: 'text', text: 'plain words' },
            ],
          },
        ],
      },
    ],
    [
      'assistant tool_use as tool_calls with JSON arguments, thinking dropped and text kept',
      {
        ...base,
        messages: [
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'hmm', signature: 'sig' },
              { type: 'redacted_thinking', data: 'xyz' },
              { type: 'text', text: 'Checking.' },
              { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } },
              { type: 'tool_use', id: 'toolu_2', name: 'time', input: {} },
            ],
          },
        ],
      },
      {
        messages: [
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content: 'Checking.',
            tool_calls: [
              { id: 'toolu_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
              { id: 'toolu_2', type: 'function', function: { name: 'time', arguments: '{}' } },
            ],
          },
        ],
      },
    ],
    [
      'a pure tool call with null content, and an assistant turn of thinking only dropped',
      {
        ...base,
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: { x: 1 } }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'done' }] },
          { role: 'assistant', content: [{ type: 'thinking', thinking: 'only', signature: '' }] },
        ],
      },
      {
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: null, tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }] },
          { role: 'tool', tool_call_id: 't', content: 'done' },
        ],
      },
    ],
    [
      'tool results as tool messages before the rest of the turn; is_error prefixed; text blocks; cache_control on the last text',
      {
        ...base,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'a', content: 'boom', is_error: true },
              {
                type: 'tool_result',
                tool_use_id: 'b',
                content: [
                  { type: 'text', text: 'x' },
                  { type: 'text', text: 'y' },
                ],
              },
              { type: 'tool_result', tool_use_id: 'c', content: 'cached', cache_control: ephemeral },
              { type: 'tool_result', tool_use_id: 'd' },
              { type: 'text', text: 'go on' },
            ],
          },
        ],
      },
      {
        messages: [
          { role: 'tool', tool_call_id: 'a', content: 'Error: boom' },
          {
            role: 'tool',
            tool_call_id: 'b',
            content: [
              { type: 'text', text: 'x' },
              { type: 'text', text: 'y' },
            ],
          },
          { role: 'tool', tool_call_id: 'c', content: [{ type: 'text', text: 'cached', cache_control: ephemeral }] },
          { role: 'tool', tool_call_id: 'd', content: '' },
          { role: 'user', content: 'go on' },
        ],
      },
    ],
    [
      'an image inside a tool result moves to a user message after the tool messages',
      ask([
        {
          type: 'tool_result',
          tool_use_id: 'shot',
          content: [
            { type: 'text', text: 'screenshot' },
            { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/' } },
          ],
        },
      ]),
      {
        messages: [
          { role: 'tool', tool_call_id: 'shot', content: 'screenshot' },
          { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/' } }] },
        ],
      },
    ],
    [
      'client tools as function tools; tool_choice any with disable_parallel_tool_use',
      {
        ...ask('hi'),
        tools: [
          { name: 'weather', description: 'Weather now', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
          { type: 'custom', name: 'noop', input_schema: { type: 'object' }, cache_control: ephemeral },
        ],
        tool_choice: { type: 'any', disable_parallel_tool_use: true },
      },
      {
        tools: [
          {
            type: 'function',
            function: { name: 'weather', description: 'Weather now', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
          },
          { type: 'function', function: { name: 'noop', parameters: { type: 'object' } } },
        ],
        tool_choice: 'required',
        parallel_tool_calls: false,
      },
    ],
    [
      'thinking enabled as reasoning.max_tokens; stop_sequences, metadata.user_id and sampling fields',
      {
        ...ask('hi'),
        max_tokens: 4096,
        thinking: { type: 'enabled', budget_tokens: 2048 },
        stop_sequences: ['END', '###'],
        metadata: { user_id: 'u-42' },
        temperature: 0.3,
        top_p: 0.9,
        top_k: 40,
      },
      { reasoning: { max_tokens: 2048 }, stop: ['END', '###'], user: 'u-42', temperature: 0.3, top_p: 0.9, top_k: 40 },
    ],
    ['stream with the usage chunk the gateway bills from', { ...ask('hi'), stream: true }, { stream: true, stream_options: { include_usage: true } }],
  ])('translates %s', (_, body, expected) => {
    expect(messagesToChat(body)).toMatchObject(expected);
  });

  it('translates the whole request exactly, ignoring unknown fields and thinking disabled', () => {
    const chat = messagesToChat({
      ...ask('hi'),
      thinking: { type: 'disabled' },
      stream: false,
      service_tier: 'auto',
      anything_else: 1,
      tools: [{ name: 'f', input_schema: { type: 'object' } }],
      tool_choice: { type: 'none' },
    });
    expect(chat).toEqual({
      model: 'claude-x',
      max_tokens: 256,
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      tool_choice: 'none',
    });
  });

  it.each<[unknown, unknown]>([
    [{ type: 'auto' }, { tool_choice: 'auto' }],
    [{ type: 'any' }, { tool_choice: 'required' }],
    [{ type: 'tool', name: 'weather' }, { tool_choice: { type: 'function', function: { name: 'weather' } } }],
    [
      { type: 'tool', name: 'weather', disable_parallel_tool_use: true },
      { tool_choice: { type: 'function', function: { name: 'weather' } }, parallel_tool_calls: false },
    ],
    [{ type: 'none' }, { tool_choice: 'none' }],
  ])('maps tool_choice %j', (choice, expected) => {
    const chat = messagesToChat({ ...ask('hi'), tools: [{ name: 'weather', input_schema: { type: 'object' } }], tool_choice: choice });
    const { tool_choice, parallel_tool_calls } = chat;
    expect({ tool_choice, ...(parallel_tool_calls === undefined ? {} : { parallel_tool_calls }) }).toEqual(expected);
  });
});

describe('messagesToChat: validation', () => {
  it.each<[string, unknown, string | null]>([
    ['a body that is not an object', [1], null],
    ['no model', { max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }, 'model'],
    ['a model that is not a string', { model: 3, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }, 'model'],
    ['no max_tokens', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, 'max_tokens'],
    ['max_tokens 0', { ...ask('x'), max_tokens: 0 }, 'max_tokens'],
    ['a fractional max_tokens', { ...ask('x'), max_tokens: 1.5 }, 'max_tokens'],
    ['no messages', { ...base }, 'messages'],
    ['empty messages', { ...base, messages: [] }, 'messages'],
    ['a system role message', { ...base, messages: [{ role: 'system', content: 'x' }] }, 'messages[0].role'],
    ['content that is a number', { ...base, messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
    ['an unknown block type', ask([{ type: 'search_result', content: [] }]), 'messages[0].content[0].type'],
    ['a text block without text', ask([{ type: 'text' }]), 'messages[0].content[0].text'],
    ['an image with a file source', ask([{ type: 'image', source: { type: 'file', file_id: 'f' } }]), 'messages[0].content[0].source'],
    ['a URL document', ask([{ type: 'document', source: { type: 'url', url: 'https://x/y.pdf' } }]), 'messages[0].content[0].source'],
    ['a tool_result without tool_use_id', ask([{ type: 'tool_result', content: 'x' }]), 'messages[0].content[0].tool_use_id'],
    ['a tool_use in a user turn', ask([{ type: 'tool_use', id: 'a', name: 'f', input: {} }]), 'messages[0].content[0].type'],
    ['a system that is a number', { ...ask('x'), system: 1 }, 'system'],
    ['a system image block', { ...ask('x'), system: [{ type: 'image' }] }, 'system[0].type'],
    ['a non-client tool type', { ...ask('x'), tools: [{ type: 'bash_20250124', name: 'bash' }] }, 'tools[0].type'],
    ['a tool without input_schema', { ...ask('x'), tools: [{ name: 'f' }] }, 'tools[0].input_schema'],
    ['tool_choice tool without a name', { ...ask('x'), tools: [{ name: 'f', input_schema: {} }], tool_choice: { type: 'tool' } }, 'tool_choice.name'],
    ['an unknown tool_choice type', { ...ask('x'), tools: [{ name: 'f', input_schema: {} }], tool_choice: { type: 'all' } }, 'tool_choice.type'],
    ['a thinking budget below the minimum', { ...ask('x'), thinking: { type: 'enabled', budget_tokens: 100 } }, 'thinking.budget_tokens'],
    ['a thinking budget equal to max_tokens', { ...ask('x'), max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 2048 } }, 'thinking.budget_tokens'],
    ['a thinking budget above max_tokens', { ...ask('x'), thinking: { type: 'enabled', budget_tokens: 1024 } }, 'thinking.budget_tokens'],
    ['an unknown thinking type', { ...ask('x'), thinking: { type: 'on' } }, 'thinking.type'],
    ['stop_sequences as a string', { ...ask('x'), stop_sequences: 'END' }, 'stop_sequences'],
    ['a numeric metadata.user_id', { ...ask('x'), metadata: { user_id: 7 } }, 'metadata.user_id'],
    ['a string temperature', { ...ask('x'), temperature: 'hot' }, 'temperature'],
    ['a string stream flag', { ...ask('x'), stream: 'yes' }, 'stream'],
  ])('refuses %s with a 400 naming the field', (_, body, param) => {
    const error = errorOf(() => messagesToChat(body));
    expect({ status: error.status, type: error.type, param: error.param }).toEqual({ status: 400, type: 'invalid_request_error', param });
  });
});

describe('messagesToChat: the web search server tool', () => {
  const search = (fields: object = {}) => ({ type: 'web_search_20250305', name: 'web_search', ...fields });
  const weather = { name: 'weather', input_schema: { type: 'object' } };
  const weatherFunction = { type: 'function', function: { name: 'weather', parameters: { type: 'object' } } };

  it.each(['web_search_20250305', 'web_search_20260209', 'web_search_20260318'])(
    'turns %s alone into the web plugin, with no tools and no tool_choice left',
    (type) => {
      const chat = messagesToChat({
        ...ask('news?'),
        tools: [{ type, name: 'web_search', max_uses: 5, cache_control: ephemeral }],
        tool_choice: { type: 'any' },
      });
      expect(chat).toEqual({ model: 'claude-x', max_tokens: 256, messages: [{ role: 'user', content: 'news?' }], plugins: [{ id: 'web' }] });
    },
  );

  it.each<[string, object, object]>([
    ['allowed_domains as the domain filter', { allowed_domains: ['a.com', 'b.org'] }, { id: 'web', search_domain_filter: ['a.com', 'b.org'] }],
    ['blocked_domains as excluded domains', { blocked_domains: ['spam.com'], allowed_domains: null }, { id: 'web', search_domain_filter: ['-spam.com'] }],
    ['an empty domain list as no filter', { allowed_domains: [] }, { id: 'web' }],
    [
      'user_location.country, upper-cased',
      { user_location: { type: 'approximate', city: 'Lyon', country: 'fr', timezone: 'Europe/Paris' } },
      { id: 'web', country: 'FR' },
    ],
    ['max_uses 1 (the one search the gateway runs)', { max_uses: 1 }, { id: 'web' }],
  ])('translates %s', (_, fields, plugin) => {
    expect(messagesToChat({ ...ask('x'), tools: [search(fields)] }).plugins).toEqual([plugin]);
  });

  it('keeps the function tools beside it; choosing web_search leaves the model its choice of them', () => {
    const chat = messagesToChat({
      ...ask('x'),
      tools: [weather, search()],
      tool_choice: { type: 'tool', name: 'web_search', disable_parallel_tool_use: true },
    });
    expect(chat).toEqual({
      model: 'claude-x',
      max_tokens: 256,
      messages: [{ role: 'user', content: 'x' }],
      tools: [weatherFunction],
      parallel_tool_calls: false,
      plugins: [{ id: 'web' }],
    });
    const named = messagesToChat({ ...ask('x'), tools: [weather, search()], tool_choice: { type: 'tool', name: 'weather' } });
    expect(named.tool_choice).toEqual({ type: 'function', function: { name: 'weather' } });
  });

  it("drops an earlier answer's search blocks sent back in an assistant turn, keeping its text", () => {
    const chat = messagesToChat({
      ...base,
      messages: [
        { role: 'user', content: 'news?' },
        {
          role: 'assistant',
          content: [
            { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'news' } },
            {
              type: 'web_search_tool_result',
              tool_use_id: 'srvtoolu_1',
              content: [{ type: 'web_search_result', url: 'https://a.com', title: 'A', encrypted_content: 'eA' }],
            },
            {
              type: 'text',
              text: 'Quiet day.',
              citations: [{ type: 'web_search_result_location', url: 'https://a.com', title: 'A', cited_text: 'x', encrypted_index: 'MA' }],
            },
          ],
        },
        { role: 'user', content: 'thanks' },
      ],
    });
    expect(chat.messages).toEqual([
      { role: 'user', content: 'news?' },
      { role: 'assistant', content: 'Quiet day.' },
      { role: 'user', content: 'thanks' },
    ]);
  });

  it.each<[string, object[], string]>([
    ['allowed and blocked domains together', [search({ allowed_domains: ['a.com'], blocked_domains: ['b.com'] })], 'tools[0]'],
    ['max_uses 0', [search({ max_uses: 0 })], 'tools[0].max_uses'],
    ['a fractional max_uses', [weather, search({ max_uses: 1.5 })], 'tools[1].max_uses'],
    ['max_uses as a string', [search({ max_uses: '3' })], 'tools[0].max_uses'],
    ['allowed_domains as a string', [search({ allowed_domains: 'a.com' })], 'tools[0].allowed_domains'],
    ['a blocked domain that is not a string', [search({ blocked_domains: [1] })], 'tools[0].blocked_domains'],
    ['a country that is not alpha-2', [search({ user_location: { type: 'approximate', country: 'FRA' } })], 'tools[0].user_location.country'],
    ['user_location as a string', [search({ user_location: 'Paris' })], 'tools[0].user_location'],
    ['two web search tools', [search(), search({ type: 'web_search_20260209' })], 'tools[1]'],
    ['another server tool', [{ type: 'web_fetch_20250910', name: 'web_fetch' }], 'tools[0].type'],
  ])('refuses %s with a 400 naming the field', (_, tools, param) => {
    const error = errorOf(() => messagesToChat({ ...ask('x'), tools }));
    expect({ status: error.status, type: error.type, param: error.param }).toEqual({ status: 400, type: 'invalid_request_error', param });
  });
});

type Completion = ChatCompletion & { usage: CostedUsage };

function completion(message: Partial<Completion['choices'][0]['message']>, finishReason: string | null = 'stop', usage: CostedUsage = USAGE): Completion {
  return {
    id: 'chatcmpl-abc',
    object: 'chat.completion',
    created: 1700000000,
    model: 'upstream/claude',
    choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: finishReason }],
    usage,
  };
}

describe('chatToMessage', () => {
  it('builds a message with thinking, text and tool_use blocks, and Anthropic usage', () => {
    const message = chatToMessage(
      completion(
        {
          content: 'Let me look.',
          reasoning: 'The user wants weather.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
            { id: 'call_2', type: 'function', function: { name: 'broken', arguments: '{"city":' } },
          ],
        },
        'tool_calls',
      ),
      'claude-x',
    );
    expect(message).toEqual({
      id: 'chatcmpl-abc',
      type: 'message',
      role: 'assistant',
      model: 'claude-x',
      content: [
        { type: 'thinking', thinking: 'The user wants weather.', signature: '' },
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Paris' } },
        { type: 'tool_use', id: 'call_2', name: 'broken', input: {} },
      ],
      stop_reason: 'tool_use',
      stop_sequence: null,
      // 100 prompt tokens of which 30 cached: Anthropic's input_tokens leaves the cached ones out.
      usage: { input_tokens: 70, output_tokens: 40, cache_read_input_tokens: 30, cache_creation_input_tokens: 0, cost: 0.00123 },
    });
  });

  it.each<[string | null, boolean, string]>([
    ['stop', false, 'end_turn'],
    ['length', false, 'max_tokens'],
    ['tool_calls', true, 'tool_use'],
    ['content_filter', false, 'refusal'],
    // Some upstreams end a tool-calling turn with "stop"; Anthropic clients expect tool_use.
    ['stop', true, 'tool_use'],
    [null, false, 'end_turn'],
  ])('maps finish_reason %s (tool calls: %s) to stop_reason %s', (finish, tools, stopReason) => {
    const calls = tools ? [{ id: 'c', type: 'function' as const, function: { name: 'f', arguments: '{}' } }] : undefined;
    expect(chatToMessage(completion({ content: 'x', tool_calls: calls }, finish), 'm').stop_reason).toBe(stopReason);
  });

  it('counts cache writes (reported by the Anthropic adapter) apart from input_tokens, and leaves out empty text', () => {
    const usage = { ...USAGE, prompt_tokens_details: { cached_tokens: 30, cache_write_tokens: 20 } };
    const message = chatToMessage(completion({ content: '' }, 'stop', usage), 'm');
    expect(message.content).toEqual([]);
    expect(message.usage).toEqual({ input_tokens: 50, output_tokens: 40, cache_read_input_tokens: 30, cache_creation_input_tokens: 20, cost: 0.00123 });
  });
});

/** One search, two results: the answer cites the first by a markdown link, not the second. */
const run: WebSearchRun = {
  id: '5eed',
  query: 'weather in Paris',
  engine: 'exa',
  hits: [
    {
      title: 'Paris forecast',
      url: 'https://meteo.example/paris',
      snippet: 'Sunny.',
      content: `Sunny and warm. ${'Details follow. '.repeat(12)}`,
      date: '2026-08-01',
    },
    { title: 'Elsewhere', url: 'https://other.example/x', snippet: 'Rain.', content: 'Rain in Brest.', date: null },
  ],
};
const answer = 'It is sunny ([meteo.example](https://meteo.example/paris)) today.';
const searchedUsage: CostedUsage = Object.assign({ ...USAGE }, { server_tool_use: { web_search_requests: 1 } });
const base64url = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

/** What Anthropic's web search shows for `run`, in both the message and the stream. */
const searchBlocks = [
  { type: 'server_tool_use', id: 'srvtoolu_5eed', name: 'web_search', input: { query: 'weather in Paris' }, caller: { type: 'direct' } },
  {
    type: 'web_search_tool_result',
    tool_use_id: 'srvtoolu_5eed',
    caller: { type: 'direct' },
    content: [
      {
        type: 'web_search_result',
        url: 'https://meteo.example/paris',
        title: 'Paris forecast',
        encrypted_content: base64url(run.hits[0].content),
        page_age: '2026-08-01',
      },
      { type: 'web_search_result', url: 'https://other.example/x', title: 'Elsewhere', encrypted_content: base64url('Rain in Brest.'), page_age: null },
    ],
  },
];
const citedText = {
  type: 'text',
  text: answer,
  citations: [
    {
      type: 'web_search_result_location',
      url: 'https://meteo.example/paris',
      title: 'Paris forecast',
      cited_text: run.hits[0].content.slice(0, 150),
      // "0", the result's index.
      encrypted_index: 'MA',
    },
  ],
};

describe('chatToMessage with a web search', () => {
  it('starts with the server_tool_use and web_search_tool_result blocks, cites the result the text links, and counts the search', () => {
    const message = chatToMessage(completion({ content: answer, reasoning: 'Look it up.' }, 'stop', searchedUsage), 'claude-x', run);
    expect(message.content).toEqual([...searchBlocks, { type: 'thinking', thinking: 'Look it up.', signature: '' }, citedText]);
    expect(message.usage).toEqual({
      input_tokens: 70,
      output_tokens: 40,
      cache_read_input_tokens: 30,
      cache_creation_input_tokens: 0,
      cost: 0.00123,
      server_tool_use: { web_search_requests: 1, web_fetch_requests: 0 },
    });
    expect(citedText.citations[0].cited_text).toHaveLength(150);
    expect(Buffer.from(searchBlocks[1].content![0].encrypted_content, 'base64url').toString('utf8')).toBe(run.hits[0].content);
  });

  it('gives text that cites no result no citations', () => {
    const message = chatToMessage(completion({ content: 'No idea.' }), 'claude-x', run);
    expect(message.content.at(-1)).toEqual({ type: 'text', text: 'No idea.' });
  });

  it('without a search, nothing changes: no server blocks, no citations, no server_tool_use', () => {
    expect(chatToMessage(completion({ content: answer }), 'claude-x', null)).toEqual(chatToMessage(completion({ content: answer }), 'claude-x'));
    expect(chatToMessage(completion({ content: answer }), 'claude-x').content).toEqual([{ type: 'text', text: answer }]);
    expect(chatToMessage(completion({ content: 'x' }), 'claude-x').usage).not.toHaveProperty('server_tool_use');
  });
});

/** Applies Anthropic stream events the way the SDK's MessageStream accumulates them. */
function accumulate(events: ParsedFrame[]): AnthropicMessage {
  let message: any;
  const json = new Map<number, string>();
  for (const { event, data } of events) {
    expect(data.type).toBe(event);
    switch (data.type) {
      case 'message_start':
        message = structuredClone(data.message);
        break;
      case 'content_block_start':
        message.content[data.index] = structuredClone(data.content_block);
        break;
      case 'content_block_delta': {
        const block = message.content[data.index];
        if (data.delta.type === 'text_delta') block.text += data.delta.text;
        if (data.delta.type === 'thinking_delta') block.thinking += data.delta.thinking;
        if (data.delta.type === 'input_json_delta') json.set(data.index, (json.get(data.index) ?? '') + data.delta.partial_json);
        if (data.delta.type === 'citations_delta') block.citations = [...(block.citations ?? []), data.delta.citation];
        break;
      }
      case 'content_block_stop': {
        const block = message.content[data.index];
        if (block.type === 'tool_use' || block.type === 'server_tool_use') block.input = JSON.parse(json.get(data.index) || '{}');
        break;
      }
      case 'message_delta':
        Object.assign(message, data.delta);
        Object.assign(message.usage, data.usage);
        break;
    }
  }
  return message;
}

function encode(chunks: ChatChunk[], finishReason: string | null = 'stop', webSearch?: WebSearchRun, usage: CostedUsage = USAGE): string[] {
  const encoder = new MessagesStreamEncoder({ id: 'chatcmpl-abc', model: 'claude-x', webSearch });
  return [...chunks.flatMap((c) => encoder.chunk(c)), ...encoder.finish(usage, finishReason)];
}

const stream = (chunks: ChatChunk[], finishReason: string | null = 'stop') => parseFrames(encode(chunks, finishReason));

const names = (events: ParsedFrame[]) => events.map((e) => e.event);

describe('MessagesStreamEncoder', () => {
  it('(a) plain text: message_start, ping, one text block, message_delta, message_stop', () => {
    const events = stream([chunk({ role: 'assistant', content: '' }), chunk({ content: 'Hel' }), chunk({ content: 'lo' }), chunk({}, 'stop')]);
    expect(names(events)).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[0].data.message).toEqual({
      id: 'chatcmpl-abc',
      type: 'message',
      role: 'assistant',
      model: 'claude-x',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    });
    expect(events[1].data).toEqual({ type: 'ping' });
    expect(events[2].data).toEqual({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    expect(events[3].data).toEqual({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } });
    expect(events[5].data).toEqual({ type: 'content_block_stop', index: 0 });
    expect(events[6].data).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { input_tokens: 70, output_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 30, cost: 0.00123 },
    });
    expect(events[7].data).toEqual({ type: 'message_stop' });
    expect(accumulate(events)).toEqual(chatToMessage(completion({ content: 'Hello' }), 'claude-x'));
  });

  it('(b) reasoning then text: a thinking block, then a text block', () => {
    const events = stream([chunk({ reasoning: 'Think' }), chunk({ reasoning: 'ing.' }), chunk({ content: 'Answer' }), chunk({}, 'stop')]);
    expect(names(events)).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[2].data.content_block).toEqual({ type: 'thinking', thinking: '', signature: '' });
    expect(events[3].data.delta).toEqual({ type: 'thinking_delta', thinking: 'Think' });
    expect(events[6].data).toMatchObject({ index: 1, content_block: { type: 'text' } });
    expect(accumulate(events)).toEqual(chatToMessage(completion({ content: 'Answer', reasoning: 'Thinking.' }), 'claude-x'));
  });

  it('(c) tool calls with arguments split over chunks: one tool_use block per call index', () => {
    const events = stream(
      [
        chunk({ content: 'Checking.' }),
        chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'weather', arguments: '' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: 'ty":"Paris"}' } }] }),
        chunk({ tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'time', arguments: '{}' } }] }),
        chunk({}, 'tool_calls'),
      ],
      'tool_calls',
    );
    expect(names(events)).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[5].data).toEqual({ type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'call_1', name: 'weather', input: {} } });
    expect(events[6].data).toEqual({ type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"ci' } });
    expect(events[9].data.content_block).toMatchObject({ type: 'tool_use', id: 'call_2', name: 'time' });
    expect(events[12].data.delta.stop_reason).toBe('tool_use');
    expect(accumulate(events)).toEqual(
      chatToMessage(
        completion(
          {
            content: 'Checking.',
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
              { id: 'call_2', type: 'function', function: { name: 'time', arguments: '{}' } },
            ],
          },
          'tool_calls',
        ),
        'claude-x',
      ),
    );
  });

  it('(d) an error mid-stream: the error event after what was sent, closing nothing', () => {
    const encoder = new MessagesStreamEncoder({ id: 'msg_1', model: 'claude-x', inputTokens: 12 });
    const frames = [
      ...encoder.chunk(chunk({ content: 'Par' })),
      ...encoder.error({ error: { message: 'The model is temporarily unavailable.', type: 'service_unavailable', code: 'model_unavailable', param: null } }),
    ];
    const events = parseFrames(frames);
    expect(names(events)).toEqual(['message_start', 'ping', 'content_block_start', 'content_block_delta', 'error']);
    expect(events[0].data.message.usage.input_tokens).toBe(12);
    expect(events[4].data).toEqual({
      type: 'error',
      error: { type: 'overloaded_error', message: 'The model is temporarily unavailable.', code: 'model_unavailable' },
    });
    expect(frames[4]).toBe(`event: error\ndata: ${JSON.stringify(events[4].data)}\n\n`);
  });

  it('maps the error by status when the caller knows it', () => {
    const encoder = new MessagesStreamEncoder({ id: 'msg_1', model: 'm' });
    const [frame] = parseFrames(encoder.error({ error: { message: 'slow down', type: 'rate_limit_error' } }, 429));
    expect(frame.data.error).toEqual({ type: 'rate_limit_error', message: 'slow down' });
  });

  it('a stream without chunks still starts the message before finishing it', () => {
    const encoder = new MessagesStreamEncoder({ id: 'msg_1', model: 'm' });
    expect(names(parseFrames(encoder.finish(USAGE, 'length')))).toEqual(['message_start', 'ping', 'message_delta', 'message_stop']);
  });
});

describe('MessagesStreamEncoder with a web search', () => {
  const chunks = [
    chunk({ content: 'It is sunny ([meteo.example]' }),
    chunk({ content: '(https://meteo.example/paris)) today.' }),
    chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'umbrella', arguments: '{}' } }] }),
    chunk({}, 'tool_calls'),
  ];
  const searched = () => parseFrames(encode(chunks, 'tool_calls', run, searchedUsage));

  it('sends the search as blocks 0 and 1 right after message_start, and every answer block two places later', () => {
    const events = searched();
    expect(names(events)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_stop',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events.slice(1, 6).map((e) => e.data)).toEqual([
      { type: 'content_block_start', index: 0, content_block: { ...searchBlocks[0], input: {} } },
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"query":"weather in Paris"}' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: searchBlocks[1] },
      { type: 'content_block_stop', index: 1 },
    ]);
    expect(events[7].data).toEqual({ type: 'content_block_start', index: 2, content_block: { type: 'text', text: '' } });
    // The citation once the text is whole, before its block stops.
    expect(events[10].data).toEqual({ type: 'content_block_delta', index: 2, delta: { type: 'citations_delta', citation: citedText.citations[0] } });
    expect(events[11].data).toEqual({ type: 'content_block_stop', index: 2 });
    expect(events[12].data).toMatchObject({ index: 3, content_block: { type: 'tool_use', id: 'call_1', name: 'umbrella' } });
    expect(events[14].data).toEqual({ type: 'content_block_stop', index: 3 });
    expect(events[15].data.usage).toEqual({
      input_tokens: 70,
      output_tokens: 40,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 30,
      cost: 0.00123,
      server_tool_use: { web_search_requests: 1, web_fetch_requests: 0 },
    });
  });

  it('accumulates into the message chatToMessage builds', () => {
    const call = { id: 'call_1', type: 'function' as const, function: { name: 'umbrella', arguments: '{}' } };
    const expected = chatToMessage(completion({ content: answer, tool_calls: [call] }, 'tool_calls', searchedUsage), 'claude-x', run);
    expect(accumulate(searched())).toEqual(expected);
  });

  it('the Anthropic SDK reads the same content and server_tool_use from the stream', async () => {
    const body = encode(chunks, 'tool_calls', run, searchedUsage).join('');
    const client = new Anthropic({
      apiKey: 'sk-ant-test',
      baseURL: 'http://gateway.test',
      maxRetries: 0,
      fetch: async () => new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } }),
    });
    const final = await client.messages.stream({ model: 'claude-x', max_tokens: 256, messages: [{ role: 'user', content: 'weather?' }] }).finalMessage();
    expect(final.content).toEqual(accumulate(searched()).content);
    expect(final.usage.server_tool_use).toEqual({ web_search_requests: 1, web_fetch_requests: 0 });
  });
});

describe('toAnthropicError', () => {
  it.each<[number, string]>([
    [400, 'invalid_request_error'],
    [401, 'authentication_error'],
    [402, 'billing_error'],
    [403, 'permission_error'],
    [404, 'not_found_error'],
    [409, 'invalid_request_error'],
    [413, 'request_too_large'],
    [429, 'rate_limit_error'],
    [500, 'api_error'],
    [502, 'api_error'],
    [503, 'overloaded_error'],
    [504, 'timeout_error'],
    [529, 'overloaded_error'],
  ])('status %i is %s', (status, type) => {
    expect(toAnthropicError(status, { error: { message: 'm', type: 'whatever', code: null, param: null } })).toEqual({
      type: 'error',
      error: { type, message: 'm' },
    });
  });

  it('keeps our code and param inside error', () => {
    const body = { error: { message: 'max_tokens is required', type: 'invalid_request_error', code: 'missing', param: 'max_tokens' } };
    expect(toAnthropicError(400, body)).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens is required', code: 'missing', param: 'max_tokens' },
    });
  });
});

describe('countMessagesTokens', () => {
  const request = { model: 'claude-x', system: 'Be brief.', messages: [{ role: 'user', content: 'What is the weather in Paris?' }] };

  it('counts the translated messages, system included, with the chat tokenizer', () => {
    const expected = countChatPromptTokens([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'What is the weather in Paris?' },
    ]);
    expect(countMessagesTokens(request)).toEqual({ input_tokens: expected });
  });

  it('adds the tokens of the tools JSON', () => {
    const tools = [{ name: 'weather', description: 'Weather now', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
    const without = countMessagesTokens(request).input_tokens;
    expect(countMessagesTokens({ ...request, tools }).input_tokens).toBe(without + countTextTokens(JSON.stringify(tools)));
  });

  it('counts a web search tool as it counts the others: by its JSON', () => {
    const tools = [{ type: 'web_search_20250305', name: 'web_search', max_uses: 2 }];
    const without = countMessagesTokens(request).input_tokens;
    expect(countMessagesTokens({ ...request, tools }).input_tokens).toBe(without + countTextTokens(JSON.stringify(tools)));
  });

  it.each<[string, unknown, string]>([
    ['no model', { messages: [{ role: 'user', content: 'x' }] }, 'model'],
    ['no messages', { model: 'm' }, 'messages'],
    ['a bad system', { model: 'm', system: 4, messages: [{ role: 'user', content: 'x' }] }, 'system'],
    [
      'a web search tool with a bad max_uses',
      { model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 0 }] },
      'tools[0].max_uses',
    ],
  ])('refuses %s', (_, body, param) => {
    const error = errorOf(() => countMessagesTokens(body));
    expect([error.status, error.param]).toEqual([400, param]);
  });
});
