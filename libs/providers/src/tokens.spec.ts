import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encode } from 'gpt-tokenizer/encoding/o200k_base';
import { countChatPromptTokens, countTextTokens, loadO200k, NON_TEXT_PART_TOKENS, pieceEnd, TokenBudget, truncateToTokens } from './tokens';

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
    expect(countChatPromptTokens(messages)).toBe(3 + 3 + t('user') + 1 + t('ann') + t('What is this?') + NON_TEXT_PART_TOKENS);
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

/**
 * Issue 14.3: 100,000 x "B" as a system prompt blocked a gateway for 269 s (BPE is quadratic in
 * the length of one pre-token). Counting is linear now, and stays an upper bound of the exact count.
 */
describe('counting caller text is bounded', () => {
  const exact = (text: string) => encode(text, { disallowedSpecial: new Set<string>() }).length;
  const corpus: [string, string][] = [
    ['prose', 'The quick brown fox jumps over the lazy dog; it was not amused. '.repeat(200)],
    ['code', 'function f(x) {\n  return x.map((y) => y * 2).filter(Boolean);\n}\n'.repeat(150)],
    ['JSON', JSON.stringify(Array.from({ length: 300 }, (_, i) => ({ id: i, name: `item ${i}`, tags: ['a', 'b'] })))],
    ['CJK', '日本語のテキストを数える。中文文本也要计算。'.repeat(200)],
    ['emoji', '😀🚀 ok 🎉👍🏽 '.repeat(400)],
    ['a short letter run', 'B'.repeat(3_000)],
    ['spaces and tabs', ' \t '.repeat(2_000)],
  ];

  it.each(corpus)('never counts %s below the exact count, and stays within a token per piece of it', (_name, text) => {
    const counted = countTextTokens(text);
    expect(counted).toBeGreaterThanOrEqual(exact(text));
    expect(counted).toBeLessThanOrEqual(exact(text) + Math.ceil(text.length / 1_000) * 2);
  });

  it('cuts pieces of at most 1,000 characters, before a white space when one is near, never inside a surrogate pair', () => {
    const run = 'B'.repeat(10_500);
    const ends: number[] = [];
    for (let start = 0; start < run.length; start = ends[ends.length - 1]) ends.push(pieceEnd(run, start));
    expect(ends).toEqual([1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 10500]);
    const words = 'word '.repeat(1_000);
    expect(pieceEnd(words, 0)).toBe(999); // the space before the word that would straddle the cut
    const emoji = '😀'.repeat(1_000);
    expect(pieceEnd(emoji, 1)).toBe(1000); // 1 + 1000 would split the pair at 1000..1001
  });

  it('counts a 2 MB single-letter run exactly, one piece after another (unbounded it took most of an hour)', () => {
    expect(countTextTokens('B'.repeat(2_000_000), new TokenBudget(60_000))).toBe(500_000);
  });

  it('counts what lies past the budget as UTF-8 bytes, an upper bound, with one budget per request', () => {
    const text = `${'word '.repeat(1_000)}${'é'.repeat(3_000)}`;
    expect(countTextTokens(text, new TokenBudget(60_000))).toBe(exact(text));
    // A budget already spent: every byte counts as a token, which no byte-level BPE exceeds.
    expect(countTextTokens(text, new TokenBudget(0))).toBe(Buffer.byteLength(text));
    expect(Buffer.byteLength(text)).toBeGreaterThanOrEqual(exact(text));
    // The messages of one request share one budget: once spent, the next message (its role too)
    // counts in bytes rather than afresh.
    const budget = new TokenBudget(0);
    const messages = [{ role: 'user', content: 'hello there' }];
    expect(countChatPromptTokens(messages, budget)).toBe(3 + 3 + Buffer.byteLength('user') + Buffer.byteLength('hello there'));
  });

  it('keeps a hostile 9 MB body to about its budget, however slow its text is to encode', () => {
    const base64 = Buffer.alloc(6_750_000, 'svc-gateway:base64-like text, slow to encode;').toString('base64');
    const budget = new TokenBudget();
    const counted = countTextTokens(base64, budget);
    expect(budget.spent()).toBe(true);
    expect(counted).toBeGreaterThan(0);
    expect(counted).toBeLessThanOrEqual(Buffer.byteLength(base64));
  });
});

describe('the encoding read from the ranks the build writes as JSON (scripts/tokenizer-ranks.js)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-ranks-'));
  const file = join(dir, 'o200k_base.ranks.json');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('holds the ranks of the module, and encodes and decodes as it does', () => {
    const written = spawnSync(process.execPath, [join(__dirname, '..', '..', '..', 'scripts', 'tokenizer-ranks.js'), file], { encoding: 'utf8' });
    expect(written.stderr).toBe('');
    expect(written.status).toBe(0);
    const ranks = (require('gpt-tokenizer/bpeRanks/o200k_base') as typeof import('gpt-tokenizer/bpeRanks/o200k_base')).default;
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(ranks);
    const fromJson = loadO200k(file);
    // Scripts, emoji, control characters and bytes that are not text on their own.
    const text = 'Hello, wörld! Привет, 世界 — नमस्ते 😀👍🏽 \u0000\t<|endoftext|> ﷽ x'.repeat(20);
    const tokens = fromJson.encode(text, { disallowedSpecial: new Set() });
    expect(tokens).toEqual(encode(text, { disallowedSpecial: new Set() }));
    expect(fromJson.decode(tokens)).toBe(text);
  });

  it('is the module itself where no such file was written (run from the sources)', () => {
    const text = 'no file here, ça va';
    expect(loadO200k(join(dir, 'missing.json')).encode(text)).toEqual(encode(text));
  });
});
