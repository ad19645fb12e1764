import { query } from '../api';
import type { Generation } from '../records';
import { activityRow } from '../testing/records';
import { activityTotals, filterQuery, generationFacts, keyChoices, keyLabel, NO_FILTERS, otherUnits, statusLevel } from './activity-data';

const GENERATION: Generation = {
  id: 'gen-abc',
  model: 'sim/echo',
  provider: 'sim',
  endpoint: '/v1/chat/completions',
  status: 'completed',
  key_id: 'key_1',
  client_request_id: null,
  preset: null,
  created_at: '2026-03-15T10:00:00.000Z',
  finished_at: '2026-03-15T10:00:01.500Z',
  tokens_prompt: 1500,
  tokens_completion: 10,
  tokens_cached: 0,
  tokens_reasoning: 0,
  total_cost: 0.00011,
  usage_by_meter: { input: 1500, output: 10 },
  latency_ms: 1234,
  time_to_first_token_ms: null,
  error_code: null,
  cache_source_id: null,
};

describe('filterQuery', () => {
  it('sends no empty filter (the API refuses one) and trims typed ones', () => {
    expect(query(filterQuery(NO_FILTERS))).toBe('');
    expect(query(filterQuery({ date: '2026-03-15', key_id: '', user: '  user-42 ' }))).toBe('?date=2026-03-15&user=user-42');
    expect(query(filterQuery({ date: '', key_id: 'key_1', user: '   ' }))).toBe('?key_id=key_1');
  });
});

describe('activityTotals', () => {
  it('adds every column, the cost exactly', () => {
    const totals = activityTotals([
      activityRow({ requests: 2, requests_not_billed: 1, prompt_tokens: 30, completion_tokens: 20, cached_tokens: 4, reasoning_tokens: 3, usage: 0.1 }),
      activityRow({ requests: 1, prompt_tokens: 15, completion_tokens: 10, usage: 0.2 }),
    ]);
    expect(totals).toEqual({
      requests: 3,
      requests_not_billed: 1,
      prompt_tokens: 45,
      completion_tokens: 30,
      cached_tokens: 4,
      reasoning_tokens: 3,
      usage: 0.3,
    });
  });

  it('is all zeros without rows', () => {
    expect(activityTotals([]).usage).toBe(0);
  });
});

describe('otherUnits', () => {
  it('names the meters used, and gives the provider cost (nano-USD) in dollars', () => {
    expect(otherUnits({ images: 3, characters: 1200, provider_cost: 20_000_000 })).toEqual(['1,200 characters', '3 images', '$0.02 provider cost']);
  });

  it('says nothing for a row of tokens only', () => {
    expect(otherUnits(activityRow({}))).toEqual([]);
  });
});

describe('keyLabel and keyChoices', () => {
  it('shows the name and hint, and says when a key is revoked', () => {
    expect(keyLabel({ id: 'key_1', name: 'prod', hint: 'svc_live_...abcd', revoked: false })).toBe('prod (svc_live_...abcd)');
    expect(keyLabel({ id: 'key_2', name: null, hint: 'svc_live_...wxyz', revoked: true })).toBe('key_2 (svc_live_...wxyz), revoked');
  });

  it('lists current keys by name before revoked ones', () => {
    const keys = [
      { id: 'k1', name: 'zeta', hint: 'h', revoked: false },
      { id: 'k2', name: 'alpha', hint: 'h', revoked: true },
      { id: 'k3', name: 'beta', hint: 'h', revoked: false },
    ];
    expect(keyChoices(keys).map((k) => k.id)).toEqual(['k3', 'k1', 'k2']);
  });
});

describe('generationFacts', () => {
  it('gives cost in USD, counts with separators, latency in ms and UTC times', () => {
    const facts = Object.fromEntries(generationFacts(GENERATION, 'prod'));
    expect(facts).toMatchObject({
      Model: 'sim/echo',
      Provider: 'sim',
      Key: 'prod (key_1)',
      Cost: '$0.00011',
      'Prompt tokens': '1,500',
      'Billed by meter': 'input 1,500, output 10',
      Latency: '1,234 ms',
      'Time to first token': '—',
      Created: '2026-03-15 10:00 UTC',
    });
    expect(facts.Error).toBeUndefined();
  });

  it('adds the error, preset, client request id and cache source only when there are some', () => {
    const facts = Object.fromEntries(
      generationFacts(
        {
          ...GENERATION,
          status: 'failed',
          error_code: 'upstream_error',
          preset: { slug: 'support', version: 3 },
          client_request_id: 'req-1',
          usage_by_meter: {},
        },
        null,
      ),
    );
    expect(facts).toMatchObject({
      Key: 'key_1',
      Error: 'upstream_error',
      Preset: 'support (version 3)',
      'Client request id': 'req-1',
      'Billed by meter': 'nothing billed',
    });
  });
});

describe('statusLevel', () => {
  it('marks failures bad and answers ok', () => {
    expect(statusLevel('completed')).toBe('ok');
    expect(statusLevel('failed')).toBe('bad');
    expect(statusLevel('expired')).toBe('bad');
    expect(statusLevel('not_billed')).toBe('warn');
  });
});
