import { countChatPromptTokens as countWithin, TokenBudget } from '../tokens';
import { compressMessages as compressWithin } from './context-compression';

type Message = { role: string; content: string | null; tool_calls?: unknown[]; tool_call_id?: string };

const msg = (role: string, content: string): Message => ({ role, content });
// Exact counts. By default a count encodes for at most 250 ms of wall time and counts the rest
// as bytes (an upper bound); a loaded test process stalled past that once, and a count grew.
const exact = () => new TokenBudget(Number.POSITIVE_INFINITY);
const countChatPromptTokens = (messages: unknown[]) => countWithin(messages, exact());
const compressMessages = <M>(messages: M[], budget: number) => compressWithin(messages, budget, exact());
/** About 200 tokens: enough that each message decides whether a small budget fits. */
const long = (tag: string) => `${tag} ${'lorem ipsum '.repeat(100)}`;

describe('context compression (spec 4.2 rule 9)', () => {
  const conversation: Message[] = [
    msg('system', 'You are terse.'),
    msg('user', long('u1')),
    msg('assistant', long('a1')),
    msg('user', long('u2')),
    msg('assistant', long('a2')),
    msg('user', long('u3')),
    msg('assistant', long('a3')),
    msg('user', 'latest question'),
  ];
  const tags = (messages: Message[]) => messages.map((m) => m.content!.split(' ')[0]);

  it('returns the messages untouched when they fit', () => {
    const result = compressMessages(conversation, countChatPromptTokens(conversation));
    expect(result).toEqual({ messages: conversation, dropped: 0, promptTokens: countChatPromptTokens(conversation), fits: true });
  });

  it('counts within the one budget it is given, as a count of the whole prompt does: once spent, the rest is counted as bytes', () => {
    const spent = () => new TokenBudget(0);
    const result = compressWithin(conversation, Number.POSITIVE_INFINITY, spent());
    expect(result.promptTokens).toBe(countWithin(conversation, spent()));
    expect(result.promptTokens).toBeGreaterThan(countChatPromptTokens(conversation));
  });

  it('drops from the middle first, keeping the system prompt and the latest user turn', () => {
    const budget = countChatPromptTokens(conversation) - 1;
    const result = compressMessages(conversation, budget);
    expect(result.dropped).toBe(1);
    // Of the six candidates [u1, a1, u2, a2, u3, a3], the middle one (index 3) goes first.
    expect(tags(result.messages)).toEqual(['You', 'u1', 'a1', 'u2', 'u3', 'a3', 'latest']);
    expect(result.promptTokens).toBe(countChatPromptTokens(result.messages));
    expect(result.fits).toBe(true);
  });

  it('keeps dropping until the prompt fits, and reports the kept prompt exactly', () => {
    const budget = countChatPromptTokens([conversation[0], conversation[1], conversation[7]]) + 10;
    const result = compressMessages(conversation, budget);
    expect(result.messages[0]).toBe(conversation[0]);
    expect(result.messages[result.messages.length - 1]).toBe(conversation[7]);
    expect(result.dropped).toBe(conversation.length - result.messages.length);
    expect(result.promptTokens).toBe(countChatPromptTokens(result.messages));
    expect(result.promptTokens).toBeLessThanOrEqual(budget);
    expect(result.fits).toBe(true);
  });

  it('says it does not fit when the protected messages alone exceed the budget', () => {
    const result = compressMessages(conversation, countChatPromptTokens([conversation[0], conversation[7]]) - 1);
    expect(tags(result.messages)).toEqual(['You', 'latest']);
    expect(result.dropped).toBe(6);
    expect(result.fits).toBe(false);
  });

  it('keeps system and developer messages wherever they are', () => {
    const messages = [msg('user', long('u1')), msg('developer', 'dev note'), msg('assistant', long('a1')), msg('user', 'q')];
    const result = compressMessages(messages, 50);
    expect(tags(result.messages)).toEqual(['dev', 'q']);
  });

  it('drops an assistant tool call together with its results, never one without the other', () => {
    const call = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] };
    const messages: Message[] = [
      msg('user', long('u1')),
      call,
      { role: 'tool', content: long('r1'), tool_call_id: 'c1' },
      { role: 'tool', content: long('r2'), tool_call_id: 'c1' },
      msg('user', 'q'),
    ];
    // Dropping the tool round alone is enough; dropping only some of it must not happen.
    const budget = countChatPromptTokens([messages[0], messages[4]]);
    const result = compressMessages(messages, budget);
    expect(result.messages).toEqual([messages[0], messages[4]]);
    expect(result.dropped).toBe(3);
  });

  it('keeps the tool rounds after the latest user message: they are part of the latest turn', () => {
    const call = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] };
    const messages: Message[] = [msg('user', long('u1')), msg('user', 'q'), call, { role: 'tool', content: long('r1'), tool_call_id: 'c1' }];
    const result = compressMessages(messages, 10);
    expect(result.messages).toEqual(messages.slice(1));
    expect(result.fits).toBe(false);
  });
});
