import { DomainError } from '@svc/platform';
import { DEFAULT_POLICY, parseGuardrailPolicy } from './policy-request';

// Issue 44 item 4: the body of POST /v1/guardrails and PATCH /v1/guardrails/{id}.
const refusal = (body: unknown, current?: Parameters<typeof parseGuardrailPolicy>[1]) => {
  try {
    parseGuardrailPolicy(body, current);
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return { param: (err as DomainError).param, kind: (err as DomainError).kind, message: (err as DomainError).message };
  }
  throw new Error('accepted');
};

describe('a guardrail body (issue 44)', () => {
  it('takes every field OpenRouter names, money to nano-USD, and fills the rest with defaults', () => {
    expect(
      parseGuardrailPolicy({
        name: 'Team',
        description: 'Q4',
        limit_usd: 12.5,
        reset_interval: 'monthly',
        include_byok_in_budgets: true,
        allowed_models: ['openai/gpt-4o', 'openai/gpt-4o'],
        ignored_providers: ['azure'],
        enforce_zdr: true,
        content_filter_builtins: [{ slug: 'email', action: 'redact' }],
        content_filters: [{ pattern: 'secret-[0-9]+', action: 'block', label: 'SECRET' }],
      }),
    ).toEqual({
      ...DEFAULT_POLICY,
      name: 'Team',
      description: 'Q4',
      limit_nano: '12500000000',
      reset_interval: 'monthly',
      include_byok_in_budgets: true,
      allowed_models: ['openai/gpt-4o'],
      ignored_providers: ['azure'],
      enforce_zdr: true,
      content_filter_builtins: [{ slug: 'email', action: 'redact' }],
      content_filters: [{ pattern: 'secret-[0-9]+', action: 'block', label: 'SECRET' }],
    });
    expect(parseGuardrailPolicy({ name: 'n' })).toEqual({ ...DEFAULT_POLICY, name: 'n' });
  });

  it('a PATCH keeps what it does not name, and null resets an optional field', () => {
    const current = parseGuardrailPolicy({ name: 'Team', limit_usd: '5', allowed_providers: ['openai'], enforce_zdr: true });
    expect(parseGuardrailPolicy({ limit_usd: null, enforce_zdr: false }, current)).toEqual({ ...current, limit_nano: null, enforce_zdr: false });
    expect(parseGuardrailPolicy({ allowed_providers: null }, current).allowed_providers).toBeNull();
    expect(refusal({ name: null }, current).param).toBe('name');
  });

  it.each([
    [{}, 'name'],
    [{ name: '' }, 'name'],
    [{ name: 'x'.repeat(201) }, 'name'],
    [{ name: 'n', budget: 5 }, 'budget'],
    [{ name: 'n', limit_usd: -1 }, 'limit_usd'],
    [{ name: 'n', limit_usd: '1.0000000001' }, 'limit_usd'],
    [{ name: 'n', limit_usd: true }, 'limit_usd'],
    [{ name: 'n', reset_interval: 'hourly' }, 'reset_interval'],
    [{ name: 'n', include_byok_in_budgets: 'yes' }, 'include_byok_in_budgets'],
    [{ name: 'n', allowed_models: 'openai/gpt-4o' }, 'allowed_models'],
    [{ name: 'n', allowed_models: ['ok', 7] }, 'allowed_models[1]'],
    [{ name: 'n', enforce_zdr: 1 }, 'enforce_zdr'],
    [{ name: 'n', data_collection: 'maybe' }, 'data_collection'],
    [{ name: 'n', content_filter_builtins: [{ slug: 'ssn', action: 'block' }] }, 'content_filter_builtins[0].slug'],
    [{ name: 'n', content_filter_builtins: [{ slug: 'email', action: 'drop' }] }, 'content_filter_builtins[0].action'],
    [{ name: 'n', content_filters: [{ pattern: 'a', action: 'flag', extra: 1 }] }, 'content_filters[0].extra'],
    [{ name: 'n', content_filters: [{ pattern: 'x'.repeat(513), action: 'flag' }] }, 'content_filters[0].pattern'],
    [{ name: 'n', content_filters: [null] }, 'content_filters[0]'],
    [[], 'body'],
  ])('refuses %j naming %s, as a 400', (body, param) => {
    expect(refusal(body)).toMatchObject({ param, kind: 'invalid' });
  });
});
