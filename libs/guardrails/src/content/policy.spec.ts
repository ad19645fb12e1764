import { CONTENT_POLICY_LIMITS, parseContentPolicy, type ContentPolicyProblem } from './policy';

/** The problems of an input that must be refused. */
function problemsOf(input: unknown): ContentPolicyProblem[] {
  const parsed = parseContentPolicy(input);
  if (parsed.ok) throw new Error('expected the policy to be refused');
  return parsed.problems;
}

const fields = (problems: ContentPolicyProblem[]) => problems.map((p) => [p.field, p.code]);

describe('parseContentPolicy', () => {
  it('given no content fields (a guardrail of budgets only), then the policy is empty', () => {
    expect(parseContentPolicy({ limit_usd: 10 })).toEqual({ ok: true, policy: { filters: [] } });
    expect(parseContentPolicy({ content_filters: null, content_filter_builtins: [] })).toEqual({ ok: true, policy: { filters: [] } });
  });

  it('given builtins and custom filters, then they compile in order, with default labels where none is given', () => {
    const parsed = parseContentPolicy({
      content_filter_builtins: [
        { slug: 'card', action: 'block' },
        { slug: 'email', action: 'redact', label: 'E-MAIL' },
      ],
      content_filters: [
        { pattern: 'falcon-\\d+', action: 'redact' },
        { pattern: '(?i)internal only', action: 'flag', label: 'Confidential' },
      ],
    });
    expect(parsed.ok && parsed.policy.filters.map(({ filter, action, label }) => ({ filter, action, label }))).toEqual([
      { filter: 'card', action: 'block', label: 'CARD' },
      { filter: 'email', action: 'redact', label: 'E-MAIL' },
      { filter: 'content_filters[0]', action: 'redact', label: 'REDACTED' },
      { filter: 'content_filters[1]', action: 'flag', label: 'Confidential' },
    ]);
  });

  it.each([
    ['not an object', 'nope', [['', 'invalid_type']]],
    ['builtins not an array', { content_filter_builtins: { slug: 'email' } }, [['content_filter_builtins', 'invalid_type']]],
    ['an entry not an object', { content_filter_builtins: ['email'] }, [['content_filter_builtins[0]', 'invalid_type']]],
    ['an unknown slug', { content_filter_builtins: [{ slug: 'ssn', action: 'block' }] }, [['content_filter_builtins[0].slug', 'unknown_slug']]],
    ['a missing slug', { content_filter_builtins: [{ action: 'block' }] }, [['content_filter_builtins[0].slug', 'missing_field']]],
    [
      'a slug twice',
      {
        content_filter_builtins: [
          { slug: 'email', action: 'block' },
          { slug: 'email', action: 'flag' },
        ],
      },
      [['content_filter_builtins[1].slug', 'duplicate_slug']],
    ],
    ['a bad action', { content_filter_builtins: [{ slug: 'email', action: 'drop' }] }, [['content_filter_builtins[0].action', 'invalid_action']]],
    ['a missing action', { content_filters: [{ pattern: 'x' }] }, [['content_filters[0].action', 'missing_field']]],
    ['an unknown field', { content_filters: [{ pattern: 'x', action: 'flag', flags: 'i' }] }, [['content_filters[0].flags', 'unknown_field']]],
    ['a label with brackets', { content_filters: [{ pattern: 'x', action: 'redact', label: 'a]b' }] }, [['content_filters[0].label', 'invalid_label']]],
    ['an empty label', { content_filters: [{ pattern: 'x', action: 'redact', label: '' }] }, [['content_filters[0].label', 'invalid_label']]],
    ['a label too long', { content_filters: [{ pattern: 'x', action: 'redact', label: 'L'.repeat(65) }] }, [['content_filters[0].label', 'invalid_label']]],
    ['a pattern not a string', { content_filters: [{ pattern: 42, action: 'flag' }] }, [['content_filters[0].pattern', 'invalid_type']]],
    ['an empty pattern', { content_filters: [{ pattern: '', action: 'flag' }] }, [['content_filters[0].pattern', 'invalid_type']]],
    ['a pattern that does not compile', { content_filters: [{ pattern: '(a', action: 'flag' }] }, [['content_filters[0].pattern', 'pattern_invalid']]],
    ['a lookahead (not RE2)', { content_filters: [{ pattern: 'a(?=b)', action: 'flag' }] }, [['content_filters[0].pattern', 'pattern_invalid']]],
    ['a lookbehind (not RE2)', { content_filters: [{ pattern: '(?<=a)b', action: 'flag' }] }, [['content_filters[0].pattern', 'pattern_invalid']]],
    ['a backreference (not RE2)', { content_filters: [{ pattern: '(a)\\1', action: 'flag' }] }, [['content_filters[0].pattern', 'pattern_invalid']]],
    ['a pattern too long', { content_filters: [{ pattern: 'a'.repeat(513), action: 'flag' }] }, [['content_filters[0].pattern', 'pattern_too_long']]],
    ['a pattern too complex', { content_filters: [{ pattern: '[a-z]{1000}', action: 'flag' }] }, [['content_filters[0].pattern', 'pattern_too_complex']]],
    ['a pattern matching the empty text', { content_filters: [{ pattern: 'x*', action: 'flag' }] }, [['content_filters[0].pattern', 'pattern_matches_empty']]],
  ])('given %s, then it is refused, naming the field', (_what, input, expected) => {
    expect(fields(problemsOf(input))).toEqual(expected);
  });

  it('given a pattern of exactly the bound, then it is accepted; one more character is refused', () => {
    const at = 'a'.repeat(CONTENT_POLICY_LIMITS.maxPatternLength);
    expect(parseContentPolicy({ content_filters: [{ pattern: at, action: 'flag' }] }).ok).toBe(true);
    expect(parseContentPolicy({ content_filters: [{ pattern: at + 'a', action: 'flag' }] }).ok).toBe(false);
  });

  it('given 50 custom filters, then they are accepted; 51 are refused as a whole', () => {
    const filters = (n: number) => Array.from({ length: n }, (_, i) => ({ pattern: `word${i}`, action: 'flag' }));
    expect(parseContentPolicy({ content_filters: filters(50) }).ok).toBe(true);
    expect(fields(problemsOf({ content_filters: filters(51) }))).toEqual([['content_filters', 'too_many_filters']]);
  });

  it('given several mistakes, then each is reported with its own path', () => {
    const problems = problemsOf({
      content_filter_builtins: [
        { slug: 'email', action: 'redact' },
        { slug: 'iban', action: 'nope' },
      ],
      content_filters: [
        { pattern: 'ok', action: 'flag' },
        { pattern: 'fine', action: 'block' },
        { pattern: '[', action: 'flag' },
      ],
    });
    expect(fields(problems)).toEqual([
      ['content_filter_builtins[1].slug', 'unknown_slug'],
      ['content_filter_builtins[1].action', 'invalid_action'],
      ['content_filters[2].pattern', 'pattern_invalid'],
    ]);
    expect(problems[2].message).toMatch(/missing closing \]/);
  });

  it('a problem never quotes the pattern: a pattern may hold the secret it is written to catch', () => {
    const secret = 'hunter2-prod-db-password';
    const problems = problemsOf({
      content_filters: [
        { pattern: `(${secret}`, action: 'flag' },
        { pattern: `${secret}(?=x)`, action: 'flag' },
        { pattern: `${secret}[a-z]{999}`, action: 'flag' },
        { pattern: `${secret}`.repeat(30), action: 'flag' },
      ],
    });
    expect(problems).toHaveLength(4);
    expect(JSON.stringify(problems)).not.toContain(secret);
  });
});
