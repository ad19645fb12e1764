import { BUILTIN_SLUGS as SERVER_BUILTIN_SLUGS, parseGuardrailPolicy } from '@svc/guardrails';
import type { Guardrail } from '../records';
import {
  accessRules,
  BUILTIN_SLUGS,
  createGuardrailBody,
  emptyGuardrailForm,
  filtersSummary,
  guardrailFormOf,
  shortList,
  updateGuardrailBody,
  type GuardrailFormValues,
} from './guardrailForm';

const guardrail = (over: Partial<Guardrail> = {}): Guardrail => ({
  id: 'gr_1',
  name: 'Support',
  description: null,
  limit_usd: null,
  reset_interval: 'never',
  include_byok_in_budgets: false,
  allowed_models: null,
  ignored_models: [],
  allowed_providers: null,
  ignored_providers: [],
  enforce_zdr: false,
  data_collection: 'allow',
  content_filter_builtins: [],
  content_filters: [],
  created_at: '2026-11-01T00:00:00.000Z',
  updated_at: '2026-11-01T00:00:00.000Z',
  ...over,
});

const filled = (): GuardrailFormValues => ({
  ...emptyGuardrailForm(),
  name: ' Support ',
  description: 'For the support team',
  limit_usd: '$12.50',
  reset_interval: 'weekly',
  include_byok_in_budgets: true,
  allowed_models: 'sim/echo,\n openai/gpt-4o',
  ignored_providers: 'sim-slow',
  enforce_zdr: true,
  deny_data_collection: true,
  builtins: { email: 'redact', phone: '', card: 'block', api_key: '', prompt_injection: '' },
  content_filters: [{ pattern: '(?i)project falcon', action: 'block', label: ' FALCON ' }],
});

describe('guardrail form', () => {
  it('offers the builtin filters the server knows, in its order', () => {
    expect(BUILTIN_SLUGS).toEqual(SERVER_BUILTIN_SLUGS);
  });

  it('creates with the name alone when nothing else is set, so the API applies its defaults', () => {
    expect(createGuardrailBody({ ...emptyGuardrailForm(), name: 'x' })).toEqual({ body: { name: 'x', reset_interval: 'monthly' } });
  });

  it('sends every field as the API takes it, and the server reads it back as typed', () => {
    const { body } = createGuardrailBody(filled());
    expect(body).toEqual({
      name: 'Support',
      description: 'For the support team',
      limit_usd: 12.5,
      reset_interval: 'weekly',
      include_byok_in_budgets: true,
      allowed_models: ['sim/echo', 'openai/gpt-4o'],
      ignored_providers: ['sim-slow'],
      enforce_zdr: true,
      data_collection: 'deny',
      content_filter_builtins: [
        { slug: 'email', action: 'redact' },
        { slug: 'card', action: 'block' },
      ],
      content_filters: [{ pattern: '(?i)project falcon', action: 'block', label: 'FALCON' }],
    });
    expect(parseGuardrailPolicy(body)).toMatchObject({
      name: 'Support',
      limit_nano: '12500000000',
      reset_interval: 'weekly',
      allowed_models: ['sim/echo', 'openai/gpt-4o'],
      ignored_models: [],
      data_collection: 'deny',
    });
  });

  it('refuses a limit that is not an amount before sending, on limit_usd', () => {
    expect(createGuardrailBody({ ...filled(), limit_usd: 'ten' }).problem).toEqual({ param: 'limit_usd', message: expect.stringContaining('USD') });
    expect(createGuardrailBody({ ...filled(), limit_usd: '-1' }).problem?.param).toBe('limit_usd');
  });

  it('passes a limit finer than a nano-dollar on, for the API to refuse with its own words', () => {
    expect(createGuardrailBody({ ...filled(), limit_usd: '0.0000000001' }).body?.limit_usd).toBe(1e-10);
  });

  it('opens a guardrail as it was saved, keeping the labels of its builtins', () => {
    const g = guardrail({
      limit_usd: 5,
      allowed_models: ['a', 'b'],
      ignored_models: ['c'],
      content_filter_builtins: [{ slug: 'phone', action: 'flag', label: 'TEL' }],
      content_filters: [{ pattern: 'x+', action: 'redact' }],
    });
    const values = guardrailFormOf(g);
    expect(values).toMatchObject({ limit_usd: '5', allowed_models: 'a, b', ignored_models: 'c', builtin_labels: { phone: 'TEL' } });
    expect(values.builtins.phone).toBe('flag');
    expect(values.content_filters).toEqual([{ pattern: 'x+', action: 'redact', label: '' }]);
    // Saved unchanged, nothing is sent.
    expect(updateGuardrailBody(values, values)).toEqual({ body: {} });
    // Another builtin added: the list is sent whole, the label kept.
    const more = { ...values, builtins: { ...values.builtins, email: 'block' as const } };
    expect(updateGuardrailBody(values, more).body).toEqual({
      content_filter_builtins: [
        { slug: 'email', action: 'block' },
        { slug: 'phone', action: 'flag', label: 'TEL' },
      ],
    });
  });

  it('sends only what changed on an edit, an emptied field as null to reset it', () => {
    const initial = guardrailFormOf(guardrail({ description: 'd', limit_usd: 5, allowed_models: ['a'], enforce_zdr: true }));
    expect(updateGuardrailBody(initial, { ...initial, description: ' ', limit_usd: '', allowed_models: '', enforce_zdr: false }).body).toEqual({
      description: null,
      limit_usd: null,
      allowed_models: null,
      enforce_zdr: false,
    });
    expect(updateGuardrailBody(initial, { ...initial, content_filters: [{ pattern: 'p', action: 'flag', label: '' }] }).body).toEqual({
      content_filters: [{ pattern: 'p', action: 'flag' }],
    });
  });
});

describe('guardrail in short', () => {
  it('says what its access rules allow and leave out', () => {
    expect(accessRules(guardrail())).toEqual(['any model or provider']);
    expect(
      accessRules(
        guardrail({ allowed_models: ['a', 'b', 'c', 'd', 'e'], ignored_providers: ['p'], allowed_providers: [], enforce_zdr: true, data_collection: 'deny' }),
      ),
    ).toEqual(['models: only a, b, c and 2 more', 'providers: none allowed', 'providers: not p', 'zero data retention only', 'no data collection']);
  });

  it('counts the content filters', () => {
    expect(filtersSummary(guardrail())).toBe('none');
    expect(
      filtersSummary(
        guardrail({
          content_filter_builtins: [{ slug: 'email', action: 'redact' }],
          content_filters: [
            { pattern: 'a', action: 'block' },
            { pattern: 'b', action: 'flag' },
          ],
        }),
      ),
    ).toBe('3 (email: redact, 2 patterns)');
  });

  it('shortens a long list', () => {
    expect(shortList(['a', 'b'])).toBe('a, b');
    expect(shortList(['a', 'b', 'c', 'd'])).toBe('a, b, c and 1 more');
  });
});
