import { countChatPromptTokens, countTextTokens, NON_TEXT_PART_TOKENS, truncateToTokens } from './tokens';

describe('countTextTokens', () => {
  it('counts o200k_base tokens', () => {
    expect(countTextTokens('')).toBe(0);
    expect(countTextTokens('Hello world')).toBe(2);
  });

  it('counts special-token markers in user text as plain text instead of throwing', () => {
    expect(countTextTokens('a <|endoftext|> b')).toBeGreaterThan(3);
  });
});

describe('countChatPromptTokens', () => {
  const t = countTextTokens;

  it('adds 3 per message and 3 for the reply priming to role and content tokens', () => {
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello world' },
    ];
    expect(countChatPromptTokens(messages)).toBe(3 + (3 + t('system') + t('Be brief.')) + (3 + t('user') + 2));
  });

  it('counts text parts, a fixed allowance per other part, and a name', () => {
    const messages = [
      {
        role: 'user',
        name: 'ann',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
        ],
      },
    ];
    expect(countChatPromptTokens(messages)).toBe(
      3 + 3 + t('user') + 1 + t('ann') + t('What is this?') + NON_TEXT_PART_TOKENS,
    );
  });

  it('counts tool calls and tool results', () => {
    const messages = [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ];
    expect(countChatPromptTokens(messages)).toBe(
      3 + (3 + t('assistant') + t('get_weather') + t('{"city":"Oslo"}')) + (3 + t('tool') + t('call_1') + t('sunny')),
    );
  });

  it('counts malformed entries as empty messages rather than failing', () => {
    expect(countChatPromptTokens([null, 'x', { role: 7, content: { a: 1 }, tool_calls: [null] }])).toBe(3 + 3);
  });
});

describe('truncateToTokens', () => {
  it('keeps text that fits and cuts the rest at a token boundary', () => {
    expect(truncateToTokens('one two three', 3)).toBe('one two three');
    expect(truncateToTokens('one two three', 2)).toBe('one two');
    expect(truncateToTokens('one two three', 0)).toBe('');
  });

  it('never splits a multi-byte character', () => {
    const text = '🙂🙂🙂🙂';
    for (let max = 0; max <= countTextTokens(text); max++) {
      const cut = truncateToTokens(text, max);
      expect(text.startsWith(cut)).toBe(true);
      expect(countTextTokens(cut)).toBeLessThanOrEqual(max);
    }
  });
});
