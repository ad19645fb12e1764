import OpenAI from 'openai';
import { errorOf } from '@svc/platform/testing/errors';
import type { ChatChunk, ChatCompletion } from '@svc/providers';
import { chatToResponse, responsesToChat, ResponsesStreamEncoder, type ResponseContext, type ResponseItem, type StoredConversation } from './responses';
import { chunk, parseFrames, USAGE, usageChunk, type ParsedFrame } from './testing/sse';
import type { CostedUsage } from './types';
import type { WebSearchRun } from './web-search';

/** A deterministic id generator: msg_1, fc_2, ... */
function counter() {
  let n = 0;
  return (prefix: string) => `${prefix}_${++n}`;
}

const translate = (body: unknown, previous: StoredConversation | null = null) => responsesToChat(body, previous, counter());

describe('responsesToChat: translation', () => {
  it('turns a string input into one user message and one stored input item', () => {
    expect(translate({ model: 'gpt-x', input: 'Hello' })).toEqual({
      chat: { model: 'gpt-x', messages: [{ role: 'user', content: 'Hello' }] },
      inputItems: [{ type: 'message', id: 'msg_1', status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'Hello' }] }],
    });
  });

  it('puts instructions first, then the previous conversation, then the input (instructions of the previous response are not in it)', () => {
    const previous: StoredConversation = {
      items: [
        { type: 'message', id: 'msg_a', status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'My name is Ada.' }] },
        { type: 'reasoning', id: 'rs_a', summary: [{ type: 'summary_text', text: 'greeting' }] },
        { type: 'message', id: 'msg_b', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hi Ada!', annotations: [] }] },
      ],
    };
    const { chat } = translate({ model: 'gpt-x', instructions: 'Talk like a pirate.', input: 'What is my name?' }, previous);
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Talk like a pirate.' },
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Hi Ada!' },
      { role: 'user', content: 'What is my name?' },
    ]);
  });

  it('translates every kind of input item, merging function calls into the assistant message before them', () => {
    const { chat, inputItems } = translate({
      model: 'gpt-x',
      input: [
        { role: 'developer', content: 'Use tools.' },
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'What is in this image, and the weather?' },
            { type: 'input_image', image_url: 'https://example.com/a.png', detail: 'high' },
            { type: 'input_image', image_url: 'data:image/png;base64,AAA=' },
          ],
        },
        { type: 'reasoning', id: 'rs_prev', summary: [], encrypted_content: 'opaque' },
        { type: 'message', id: 'msg_prev', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Let me check.', annotations: [] }] },
        { type: 'function_call', id: 'fc_prev', call_id: 'call_1', name: 'weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call', call_id: 'call_2', name: 'time', arguments: '{}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
        { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: '12:00' }] },
      ],
    });
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Use tools.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this image, and the weather?' },
          { type: 'image_url', image_url: { url: 'https://example.com/a.png', detail: 'high' } },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAA=' } },
        ],
      },
      {
        role: 'assistant',
        content: 'Let me check.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'time', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      { role: 'tool', tool_call_id: 'call_2', content: '12:00' },
    ]);
    // Ids: given ones kept, the others from the generator in order.
    expect(inputItems.map((item) => item.id)).toEqual(['msg_1', 'msg_2', 'rs_prev', 'msg_prev', 'fc_prev', 'fc_3', 'fco_4', 'fco_5']);
    expect(inputItems[1]).toEqual({
      type: 'message',
      id: 'msg_2',
      status: 'completed',
      role: 'user',
      content: [
        { type: 'input_text', text: 'What is in this image, and the weather?' },
        { type: 'input_image', image_url: 'https://example.com/a.png', detail: 'high' },
        { type: 'input_image', image_url: 'data:image/png;base64,AAA=', detail: 'auto' },
      ],
    });
    expect(inputItems[5]).toEqual({ type: 'function_call', id: 'fc_3', call_id: 'call_2', name: 'time', arguments: '{}', status: 'completed' });
    expect(inputItems[7]).toEqual({ type: 'function_call_output', id: 'fco_5', call_id: 'call_2', output: '12:00', status: 'completed' });
  });

  it('a function call with no assistant message before it becomes an assistant message of its own', () => {
    const { chat } = translate({
      model: 'm',
      input: [
        { role: 'user', content: 'hi' },
        { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' },
      ],
    });
    expect(chat.messages[1]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
    });
  });

  it.each<[string, object, object]>([
    ['max_output_tokens as max_tokens', { max_output_tokens: 500 }, { max_tokens: 500 }],
    ['temperature and top_p', { temperature: 0.2, top_p: 0.5 }, { temperature: 0.2, top_p: 0.5 }],
    ['reasoning effort', { reasoning: { effort: 'high', summary: 'auto' } }, { reasoning: { effort: 'high' } }],
    ['stream with usage', { stream: true }, { stream: true, stream_options: { include_usage: true } }],
    [
      'json_schema text format',
      { text: { format: { type: 'json_schema', name: 'person', schema: { type: 'object' }, strict: true } } },
      { response_format: { type: 'json_schema', json_schema: { name: 'person', schema: { type: 'object' }, strict: true } } },
    ],
    ['json_object text format', { text: { format: { type: 'json_object' } } }, { response_format: { type: 'json_object' } }],
    [
      'function tools',
      {
        tools: [{ type: 'function', name: 'weather', description: 'Weather', parameters: { type: 'object' }, strict: true }],
        parallel_tool_calls: false,
      },
      {
        tools: [{ type: 'function', function: { name: 'weather', description: 'Weather', parameters: { type: 'object' }, strict: true } }],
        parallel_tool_calls: false,
      },
    ],
  ])('translates %s', (_, fields, expected) => {
    expect(translate({ model: 'm', input: 'x', ...fields }).chat).toMatchObject(expected);
  });

  it('forwards nothing for text format text, metadata, store, previous_response_id or a null reasoning effort', () => {
    const { chat } = translate({
      model: 'm',
      input: 'x',
      text: { format: { type: 'text' } },
      metadata: { k: 'v' },
      store: true,
      previous_response_id: 'resp_0',
      reasoning: { effort: null },
      include: ['reasoning.encrypted_content'],
    });
    expect(chat).toEqual({ model: 'm', messages: [{ role: 'user', content: 'x' }] });
  });

  it.each<[unknown, unknown]>([
    ['auto', 'auto'],
    ['none', 'none'],
    ['required', 'required'],
    [
      { type: 'function', name: 'weather' },
      { type: 'function', function: { name: 'weather' } },
    ],
  ])('maps tool_choice %j', (choice, expected) => {
    const tools = [{ type: 'function', name: 'weather', parameters: { type: 'object' } }];
    expect(translate({ model: 'm', input: 'x', tools, tool_choice: choice }).chat.tool_choice).toEqual(expected);
  });
});

describe('responsesToChat: validation', () => {
  it.each<[string, unknown, string | null]>([
    ['a body that is not an object', 'hi', null],
    ['no model', { input: 'x' }, 'model'],
    ['no input', { model: 'm' }, 'input'],
    ['a numeric input', { model: 'm', input: 4 }, 'input'],
    ['an empty input without a previous response', { model: 'm', input: [] }, 'input'],
    ['a bad role', { model: 'm', input: [{ role: 'tool', content: 'x' }] }, 'input[0].role'],
    ['an item reference', { model: 'm', input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input[0].type'],
    ['a function_call without call_id', { model: 'm', input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, 'input[0].call_id'],
    ['a function_call_output without output', { model: 'm', input: [{ type: 'function_call_output', call_id: 'c' }] }, 'input[0].output'],
    ['an image by file id', { model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] }, 'input[0].content[0].image_url'],
    [
      'an image in an assistant message',
      { model: 'm', input: [{ role: 'assistant', content: [{ type: 'input_image', image_url: 'u' }] }] },
      'input[0].content[0].type',
    ],
    ['an unknown content part', { model: 'm', input: [{ role: 'user', content: [{ type: 'input_audio' }] }] }, 'input[0].content[0].type'],
    ['instructions that are not a string', { model: 'm', input: 'x', instructions: ['a'] }, 'instructions'],
    ['max_output_tokens 0', { model: 'm', input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
    ['a hosted tool', { model: 'm', input: 'x', tools: [{ type: 'file_search', vector_store_ids: [] }] }, 'tools[0].type'],
    ['a function tool without a name', { model: 'm', input: 'x', tools: [{ type: 'function' }] }, 'tools[0].name'],
    ['an unknown tool_choice', { model: 'm', input: 'x', tools: [{ type: 'function', name: 'f' }], tool_choice: 'any' }, 'tool_choice'],
    ['json_schema without a name', { model: 'm', input: 'x', text: { format: { type: 'json_schema', schema: {} } } }, 'text.format.name'],
    ['an unknown text format', { model: 'm', input: 'x', text: { format: { type: 'yaml' } } }, 'text.format.type'],
    ['a reasoning effort that is not a string', { model: 'm', input: 'x', reasoning: { effort: 3 } }, 'reasoning.effort'],
    ['background mode', { model: 'm', input: 'x', background: true }, 'background'],
    ['a string temperature', { model: 'm', input: 'x', temperature: 'hot' }, 'temperature'],
  ])('refuses %s with a 400 naming the field', (_, body, param) => {
    const error = errorOf(() => translate(body));
    expect({ status: error.status, type: error.type, param: error.param }).toEqual({ status: 400, type: 'invalid_request_error', param });
  });

  it('accepts an empty input when continuing a previous response', () => {
    const previous: StoredConversation = {
      items: [{ type: 'message', id: 'msg_a', status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }],
    };
    expect(translate({ model: 'm', input: [] }, previous).chat.messages).toEqual([{ role: 'user', content: 'hi' }]);
  });
});

describe('responsesToChat: the web_search tool', () => {
  const weather = { type: 'function', name: 'weather', parameters: { type: 'object' } };

  it.each(['web_search', 'web_search_2025_08_26', 'web_search_preview', 'web_search_preview_2025_03_11'])(
    'turns %s alone into the web plugin, with no tools and no tool_choice left',
    (type) => {
      expect(translate({ model: 'm', input: 'news?', tools: [{ type }], tool_choice: 'required' }).chat).toEqual({
        model: 'm',
        messages: [{ role: 'user', content: 'news?' }],
        plugins: [{ id: 'web' }],
      });
    },
  );

  it.each<[string, object, object]>([
    [
      'filters.allowed_domains as the domain filter',
      { filters: { allowed_domains: ['pubmed.ncbi.nlm.nih.gov'] } },
      { search_domain_filter: ['pubmed.ncbi.nlm.nih.gov'] },
    ],
    ['empty filters as none', { filters: { allowed_domains: [] } }, {}],
    ['user_location.country', { user_location: { type: 'approximate', country: 'US', city: 'Boston' } }, { country: 'US' }],
    ['search_context_size low as 3 results', { search_context_size: 'low' }, { max_results: 3 }],
    ['search_context_size medium as 5 results', { search_context_size: 'medium' }, { max_results: 5 }],
    ['search_context_size high as 10 results', { search_context_size: 'high' }, { max_results: 10 }],
    ['external_web_access as nothing', { external_web_access: true }, {}],
  ])('translates %s', (_, fields, options) => {
    expect(translate({ model: 'm', input: 'x', tools: [{ type: 'web_search', ...fields }] }).chat.plugins).toEqual([{ id: 'web', ...options }]);
  });

  it('keeps the function tools beside it; choosing web_search leaves the model its choice of them', () => {
    const { chat } = translate({ model: 'm', input: 'x', tools: [weather, { type: 'web_search' }], tool_choice: { type: 'web_search_preview' } });
    expect(chat).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }],
      plugins: [{ id: 'web' }],
    });
  });

  it('accepts a web_search_call item sent back, keeps it as an input item and does not give it to the model', () => {
    const action = { type: 'search', query: 'news', sources: [{ type: 'url', url: 'https://a.com' }] };
    const { chat, inputItems } = translate({
      model: 'm',
      input: [
        { role: 'user', content: 'news?' },
        { type: 'web_search_call', id: 'ws_prev', status: 'completed', action },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Quiet day.', annotations: [] }] },
        { type: 'web_search_call', status: 'odd' },
        { role: 'user', content: 'thanks' },
      ],
    });
    expect(chat.messages).toEqual([
      { role: 'user', content: 'news?' },
      { role: 'assistant', content: 'Quiet day.' },
      { role: 'user', content: 'thanks' },
    ]);
    expect(inputItems[1]).toEqual({ type: 'web_search_call', id: 'ws_prev', status: 'completed', action });
    expect(inputItems[3]).toEqual({ type: 'web_search_call', id: 'ws_3', status: 'completed', action: { type: 'search' } });
  });

  it('skips the web_search_call of a previous response when continuing it', () => {
    const previous: StoredConversation = {
      items: [
        { type: 'message', id: 'msg_a', status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'news?' }] },
        { type: 'web_search_call', id: 'ws_a', status: 'completed', action: { type: 'search', query: 'news', sources: [] } },
        { type: 'message', id: 'msg_b', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Quiet.', annotations: [] }] },
      ],
    };
    expect(translate({ model: 'm', input: 'more?' }, previous).chat.messages).toEqual([
      { role: 'user', content: 'news?' },
      { role: 'assistant', content: 'Quiet.' },
      { role: 'user', content: 'more?' },
    ]);
  });

  it.each<[string, object[], string]>([
    ['an unknown search_context_size', [{ type: 'web_search', search_context_size: 'huge' }], 'tools[0].search_context_size'],
    ['filters that are not an object', [{ type: 'web_search', filters: ['a.com'] }], 'tools[0].filters'],
    ['allowed_domains as a string', [weather, { type: 'web_search', filters: { allowed_domains: 'a.com' } }], 'tools[1].filters.allowed_domains'],
    ['a country that is not alpha-2', [{ type: 'web_search', user_location: { country: 'United States' } }], 'tools[0].user_location.country'],
    ['two web search tools', [{ type: 'web_search' }, { type: 'web_search_preview' }], 'tools[1]'],
  ])('refuses %s with a 400 naming the field', (_, tools, param) => {
    const error = errorOf(() => translate({ model: 'm', input: 'x', tools }));
    expect({ status: error.status, type: error.type, param: error.param }).toEqual({ status: 400, type: 'invalid_request_error', param });
  });
});

type Completion = ChatCompletion & { usage: CostedUsage };

function completion(message: Partial<Completion['choices'][0]['message']>, finishReason: string | null = 'stop'): Completion {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1700000000,
    model: 'upstream/gpt',
    choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: finishReason }],
    usage: USAGE,
  };
}

const ctx: ResponseContext = {
  id: 'resp_abc',
  created: 1700000100,
  model: 'gpt-x',
  provider: 'openai',
  request: { model: 'gpt-x', input: 'hi', instructions: 'Be brief.', max_output_tokens: 300, metadata: { team: 'a' }, temperature: 0.5 },
  previousResponseId: 'resp_prev',
  store: true,
};

const usage = {
  input_tokens: 100,
  input_tokens_details: { cached_tokens: 30 },
  output_tokens: 40,
  output_tokens_details: { reasoning_tokens: 12 },
  total_tokens: 140,
  cost: 0.00123,
};

describe('chatToResponse', () => {
  it('builds the response object with reasoning, message and function_call items, echoing the request', () => {
    const response = chatToResponse(
      completion(
        {
          content: 'Checking.',
          reasoning: 'Needs the weather tool.',
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }],
        },
        'tool_calls',
      ),
      ctx,
    );
    expect(response).toEqual({
      id: 'resp_abc',
      object: 'response',
      created_at: 1700000100,
      status: 'completed',
      background: false,
      error: null,
      incomplete_details: null,
      instructions: 'Be brief.',
      max_output_tokens: 300,
      model: 'gpt-x',
      provider: 'openai',
      output: [
        { type: 'reasoning', id: 'rs_abc_0', summary: [{ type: 'summary_text', text: 'Needs the weather tool.' }] },
        {
          type: 'message',
          id: 'msg_abc_1',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: 'Checking.', annotations: [] }],
        },
        { type: 'function_call', id: 'fc_abc_2', call_id: 'call_1', name: 'weather', arguments: '{"city":"Paris"}', status: 'completed' },
      ],
      parallel_tool_calls: true,
      previous_response_id: 'resp_prev',
      reasoning: { effort: null, summary: null },
      store: true,
      temperature: 0.5,
      text: { format: { type: 'text' } },
      tool_choice: 'auto',
      tools: [],
      top_p: 1,
      truncation: 'disabled',
      usage,
      user: null,
      metadata: { team: 'a' },
    });
  });

  it('is incomplete with max_output_tokens when the answer hit the length limit', () => {
    const response = chatToResponse(completion({ content: 'Once upon' }, 'length'), ctx);
    expect(response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
    expect(response.output).toEqual([
      { type: 'message', id: 'msg_abc_0', status: 'incomplete', role: 'assistant', content: [{ type: 'output_text', text: 'Once upon', annotations: [] }] },
    ]);
  });

  it('a pure tool call has no message item; an empty answer has an empty one', () => {
    const call = { id: 'c', type: 'function' as const, function: { name: 'f', arguments: '{}' } };
    expect(chatToResponse(completion({ content: null, tool_calls: [call] }, 'tool_calls'), ctx).output.map((i) => i.type)).toEqual(['function_call']);
    expect(chatToResponse(completion({ content: '' }), ctx).output).toEqual([
      { type: 'message', id: 'msg_abc_0', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: '', annotations: [] }] },
    ]);
  });

  it('echoes the request fields that were given', () => {
    const request = {
      tools: [{ type: 'function', name: 'f', parameters: {} }],
      tool_choice: 'required',
      text: { format: { type: 'json_object' } },
      reasoning: { effort: 'low', summary: 'auto' },
      parallel_tool_calls: false,
      top_p: 0.3,
      user: 'u1',
    };
    const response = chatToResponse(completion({ content: '{}' }), { ...ctx, request, previousResponseId: null, store: false });
    expect(response).toMatchObject({
      ...request,
      instructions: null,
      max_output_tokens: null,
      metadata: {},
      previous_response_id: null,
      store: false,
      temperature: 1,
    });
  });
});

/** One search, two results: the answer cites the first by a markdown link, not the second. */
const run: WebSearchRun = {
  id: '5eed',
  query: 'weather in Paris',
  engine: 'exa',
  hits: [
    { title: 'Paris forecast', url: 'https://meteo.example/paris', snippet: 'Sunny.', content: 'Sunny and warm.', date: '2026-08-01' },
    { title: 'Elsewhere', url: 'https://other.example/x', snippet: 'Rain.', content: 'Rain in Brest.', date: null },
  ],
};
const answer = 'It is sunny ([meteo.example](https://meteo.example/paris)) today.';
const searchCtx: ResponseContext = { ...ctx, webSearch: run };
const searchCall = {
  type: 'web_search_call',
  id: 'ws_5eed',
  status: 'completed',
  action: {
    type: 'search',
    query: 'weather in Paris',
    sources: [
      { type: 'url', url: 'https://meteo.example/paris' },
      { type: 'url', url: 'https://other.example/x' },
    ],
  },
};
const annotations = [
  { type: 'url_citation', url: 'https://meteo.example/paris', title: 'Paris forecast', start_index: 13, end_index: 57 },
  // Not cited: 0 and 0, as chat annotates every result.
  { type: 'url_citation', url: 'https://other.example/x', title: 'Elsewhere', start_index: 0, end_index: 0 },
];

describe('chatToResponse with a web search', () => {
  it('starts the output with the web_search_call item and annotates the message with every result', () => {
    const response = chatToResponse(completion({ content: answer, reasoning: 'Look it up.' }), searchCtx);
    expect(response.output).toEqual([
      searchCall,
      { type: 'reasoning', id: 'rs_abc_1', summary: [{ type: 'summary_text', text: 'Look it up.' }] },
      { type: 'message', id: 'msg_abc_2', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: answer, annotations }] },
    ]);
    expect(answer.slice(13, 57)).toBe('[meteo.example](https://meteo.example/paris)');
  });

  it('without a search, nothing changes', () => {
    const plain = chatToResponse(completion({ content: answer }), ctx);
    expect(chatToResponse(completion({ content: answer }), { ...ctx, webSearch: null })).toEqual(plain);
    expect(plain.output).toEqual([
      { type: 'message', id: 'msg_abc_0', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: answer, annotations: [] }] },
    ]);
  });
});

function stream(chunks: ChatChunk[], finishReason: string | null, context: ResponseContext = ctx) {
  const encoder = new ResponsesStreamEncoder(context);
  const frames = [...chunks.flatMap((c) => encoder.chunk(c)), ...encoder.finish(USAGE, finishReason)];
  return { encoder, frames, events: parseFrames(frames) };
}

const types = (events: ParsedFrame[]) => events.map((e) => e.event);

function expectWellFormed(events: ParsedFrame[]) {
  events.forEach((e, i) => {
    expect(e.data.type).toBe(e.event);
    expect(e.data.sequence_number).toBe(i);
  });
}

describe('ResponsesStreamEncoder', () => {
  it('(a) plain text: created, in_progress, one message item, completed equal to chatToResponse', () => {
    const { encoder, events } = stream(
      [chunk({ role: 'assistant', content: '' }), chunk({ content: 'Hel' }), chunk({ content: 'lo' }), chunk({}, 'stop'), usageChunk()],
      'stop',
    );
    expect(types(events)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expectWellFormed(events);
    expect(events[0].data.response).toMatchObject({ id: 'resp_abc', status: 'in_progress', output: [], usage: null });
    expect(events[2].data).toEqual({
      type: 'response.output_item.added',
      sequence_number: 2,
      output_index: 0,
      item: { type: 'message', id: 'msg_abc_0', status: 'in_progress', role: 'assistant', content: [] },
    });
    expect(events[3].data).toEqual({
      type: 'response.content_part.added',
      sequence_number: 3,
      item_id: 'msg_abc_0',
      output_index: 0,
      content_index: 0,
      part: { type: 'output_text', text: '', annotations: [] },
    });
    expect(events[4].data).toEqual({
      type: 'response.output_text.delta',
      sequence_number: 4,
      item_id: 'msg_abc_0',
      output_index: 0,
      content_index: 0,
      delta: 'Hel',
      logprobs: [],
    });
    expect(events[6].data).toMatchObject({ text: 'Hello', item_id: 'msg_abc_0' });
    const expected = chatToResponse(completion({ content: 'Hello' }), ctx);
    expect(events[9].data.response).toEqual(expected);
    expect(encoder.response()).toEqual(expected);
  });

  it('(b) reasoning then text: a reasoning item with its summary events, then the message', () => {
    const { events } = stream([chunk({ reasoning: 'Think' }), chunk({ reasoning: 'ing.' }), chunk({ content: 'Answer' }), chunk({}, 'stop')], 'stop');
    expect(types(events)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.reasoning_summary_part.added',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.done',
      'response.reasoning_summary_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expectWellFormed(events);
    expect(events[2].data.item).toEqual({ type: 'reasoning', id: 'rs_abc_0', summary: [] });
    expect(events[4].data).toMatchObject({ item_id: 'rs_abc_0', output_index: 0, summary_index: 0, delta: 'Think' });
    expect(events[7].data.part).toEqual({ type: 'summary_text', text: 'Thinking.' });
    expect(events[9].data).toMatchObject({ output_index: 1, item: { id: 'msg_abc_1' } });
    expect(events[15].data.response).toEqual(chatToResponse(completion({ content: 'Answer', reasoning: 'Thinking.' }), ctx));
  });

  it('(c) tool calls with arguments split over chunks: one function_call item per call', () => {
    const { events } = stream(
      [
        chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'weather', arguments: '' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: 'ty":"Paris"}' } }] }),
        chunk({ tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'time', arguments: '{}' } }] }),
        chunk({}, 'tool_calls'),
      ],
      'tool_calls',
    );
    expect(types(events)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expectWellFormed(events);
    expect(events[2].data.item).toEqual({ type: 'function_call', id: 'fc_abc_0', call_id: 'call_1', name: 'weather', arguments: '', status: 'in_progress' });
    expect(events[3].data).toMatchObject({ item_id: 'fc_abc_0', output_index: 0, delta: '{"ci' });
    expect(events[5].data).toMatchObject({ item_id: 'fc_abc_0', name: 'weather', arguments: '{"city":"Paris"}' });
    const calls = [
      { id: 'call_1', type: 'function' as const, function: { name: 'weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_2', type: 'function' as const, function: { name: 'time', arguments: '{}' } },
    ];
    expect(events[11].data.response).toEqual(chatToResponse(completion({ content: null, tool_calls: calls }, 'tool_calls'), ctx));
  });

  it('(d) an error mid-stream: response.failed with the items so far and the error', () => {
    const encoder = new ResponsesStreamEncoder(ctx);
    const frames = [
      ...encoder.chunk(chunk({ content: 'Par' })),
      ...encoder.error({ error: { message: 'The upstream failed.', type: 'api_error', code: null, param: null } }),
    ];
    const events = parseFrames(frames);
    expect(types(events)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.failed',
    ]);
    expectWellFormed(events);
    expect(events[5].data.response).toMatchObject({
      status: 'failed',
      error: { code: 'server_error', message: 'The upstream failed.' },
      usage: null,
      output: [{ type: 'message', id: 'msg_abc_0', status: 'incomplete', content: [{ type: 'output_text', text: 'Par', annotations: [] }] }],
    });
    expect(encoder.response()).toEqual(events[5].data.response);
  });

  it('keeps our error code when there is one', () => {
    const encoder = new ResponsesStreamEncoder(ctx);
    const [, , failed] = parseFrames(encoder.error({ error: { message: 'busy', type: 'service_unavailable', code: 'model_unavailable' } }));
    expect(failed.data.response.error).toEqual({ code: 'model_unavailable', message: 'busy' });
  });

  it('ends with response.incomplete, equal to chatToResponse, when the answer hit the length limit', () => {
    const { events } = stream([chunk({ content: 'Once upon' }), chunk({}, 'length')], 'length');
    expect(events.at(-1)?.event).toBe('response.incomplete');
    expect(events.at(-1)?.data.response).toEqual(chatToResponse(completion({ content: 'Once upon' }, 'length'), ctx));
  });

  it('an answer without any delta still has its (empty) message item', () => {
    const { events } = stream([], 'stop');
    expect(types(events)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.at(-1)?.data.response).toEqual(chatToResponse(completion({ content: '' }), ctx));
  });
});

describe('ResponsesStreamEncoder with a web search', () => {
  const chunks = [chunk({ content: 'It is sunny ([meteo.example]' }), chunk({ content: '(https://meteo.example/paris)) today.' }), chunk({}, 'stop')];

  it('tells the search first as item 0, shifts the message to 1 and adds its annotations before its text is done', () => {
    const { encoder, events } = stream(chunks, 'stop', searchCtx);
    expect(types(events)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.web_search_call.in_progress',
      'response.web_search_call.searching',
      'response.web_search_call.completed',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.annotation.added',
      'response.output_text.annotation.added',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expectWellFormed(events);
    expect(events[2].data).toEqual({
      type: 'response.output_item.added',
      sequence_number: 2,
      output_index: 0,
      item: { type: 'web_search_call', id: 'ws_5eed', status: 'in_progress', action: { type: 'search', query: 'weather in Paris' } },
    });
    expect(events.slice(3, 6).map((e) => e.data)).toEqual(
      ['in_progress', 'searching', 'completed'].map((state, i) => ({
        type: `response.web_search_call.${state}`,
        sequence_number: 3 + i,
        item_id: 'ws_5eed',
        output_index: 0,
      })),
    );
    expect(events[6].data).toEqual({ type: 'response.output_item.done', sequence_number: 6, output_index: 0, item: searchCall });
    expect(events[7].data).toMatchObject({ output_index: 1, item: { type: 'message', id: 'msg_abc_1' } });
    expect(events[11].data).toEqual({
      type: 'response.output_text.annotation.added',
      sequence_number: 11,
      item_id: 'msg_abc_1',
      output_index: 1,
      content_index: 0,
      annotation_index: 0,
      annotation: annotations[0],
    });
    expect(events[12].data).toMatchObject({ annotation_index: 1, annotation: annotations[1] });
    expect(events[14].data.part).toEqual({ type: 'output_text', text: answer, annotations });
    expect(events[15].data.item.content).toEqual([{ type: 'output_text', text: answer, annotations }]);
    const expected = chatToResponse(completion({ content: answer }), searchCtx);
    expect(events[16].data.response).toEqual(expected);
    expect(encoder.response()).toEqual(expected);
  });

  it('keeps the finished search in a response that fails afterwards', () => {
    const encoder = new ResponsesStreamEncoder(searchCtx);
    encoder.chunk(chunk({ content: 'It is' }));
    const [failed] = parseFrames(encoder.error({ error: { message: 'boom', type: 'api_error' } }));
    expect(failed.data.response.output.map((item: ResponseItem) => [item.type, item.status])).toEqual([
      ['web_search_call', 'completed'],
      ['message', 'incomplete'],
    ]);
  });
});

/** The official SDK reading our bytes through a fetch that never leaves the process. */
function sdkServing(body: string, contentType: string): OpenAI {
  return new OpenAI({
    apiKey: 'sk-test',
    baseURL: 'http://gateway.test/v1',
    maxRetries: 0,
    fetch: async () => new Response(body, { status: 200, headers: { 'content-type': contentType } }),
  });
}

describe('the openai SDK reads what we write', () => {
  it('accumulates the stream into the same output as the final event, output_text included', async () => {
    const { frames, events } = stream(
      [
        chunk({ reasoning: 'Hmm.' }),
        chunk({ content: 'It is ' }),
        chunk({ content: 'sunny.' }),
        chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
      ],
      'tool_calls',
    );
    const client = sdkServing(frames.join(''), 'text/event-stream');
    const seen: string[] = [];
    const runner = client.responses.stream({ model: 'gpt-x', input: 'hi' });
    runner.on('event', (event) => seen.push(event.type));
    const final = await runner.finalResponse();
    expect(seen).toEqual(types(events));
    expect(final.output_text).toBe('It is sunny.');
    const completed = events.at(-1)?.data.response;
    expect(final.output.map((item) => ({ ...item, parsed_arguments: undefined, content: undefined }))).toEqual(
      completed.output.map((item: ResponseItem) => ({ ...item, parsed_arguments: undefined, content: undefined })),
    );
    expect(final.usage).toEqual(usage);
  });

  it('follows the web search call and the annotations through the stream', async () => {
    const { frames, events } = stream([chunk({ content: answer }), chunk({}, 'stop')], 'stop', searchCtx);
    const client = sdkServing(frames.join(''), 'text/event-stream');
    const seen: string[] = [];
    const runner = client.responses.stream({ model: 'gpt-x', input: 'weather?', tools: [{ type: 'web_search' }] });
    runner.on('event', (event) => seen.push(event.type));
    const final = await runner.finalResponse();
    expect(seen).toEqual(types(events));
    expect(final.output_text).toBe(answer);
    expect(final.output[0]).toEqual(searchCall);
    expect(final.output[1]).toMatchObject({ type: 'message', content: [{ type: 'output_text', text: answer, annotations }] });
  });

  it('parses a non-streamed response and computes output_text', async () => {
    const response = chatToResponse(completion({ content: 'Hello there.' }), ctx);
    const client = sdkServing(JSON.stringify(response), 'application/json');
    const parsed = await client.responses.create({ model: 'gpt-x', input: 'hi' });
    expect(parsed.output_text).toBe('Hello there.');
    expect(parsed.id).toBe('resp_abc');
  });
});
