import { errorOf } from '@svc/platform/testing/errors';
import { parseCatalog, type CatalogModel } from './catalog';
import { ProviderStats } from './provider-stats';
import { DomainError } from '@svc/platform';
import {
  parseModelId,
  parseProviderPreferences,
  requestParameters,
  routeTargets,
  routeTargetsWithin,
  suffixFields,
  type ProviderPreferences,
  type RoutingAccess,
  type Suffix,
} from './routing';

/**
 * One model, four providers in this catalog order:
 *   a: $1/$4, int8, no tools, allow collection
 *   b: $3/$12, fp8, tools, deny collection, zdr
 *   c: $0.5/$2 (cheapest), bf16, tools, allow collection
 *   d: $5/$20 (dearest), fp16, tools, deny collection, not zdr
 */
const catalog = parseCatalog(
  {
    providers: Object.fromEntries(['a', 'b', 'c', 'd'].map((p) => [p, { adapter: 'openai', base_url: 'simulator' }])),
    models: [
      {
        id: 't/m',
        type: 'chat',
        context_length: 1000,
        supported_parameters: ['max_tokens', 'tools', 'tool_choice', 'reasoning'],
        pricing: { input: 1, output: 4 },
        providers: [
          { provider: 'a', upstream_model: 'a-m', quantization: 'int8', tools: false },
          { provider: 'b', upstream_model: 'b-m', quantization: 'fp8', pricing: { input: 3, output: 12 }, data_collection: 'deny', zdr: true },
          { provider: 'c', upstream_model: 'c-m', quantization: 'bf16', pricing: { input: 0.5, output: 2 } },
          { provider: 'd', upstream_model: 'd-m', quantization: 'fp16', pricing: { input: 5, output: 20 }, data_collection: 'deny' },
        ],
      },
      {
        id: 't/plain',
        type: 'chat',
        context_length: 1000,
        supported_parameters: ['max_tokens'],
        pricing: { input: 1, output: 1 },
        providers: [{ provider: 'a', upstream_model: 'p' }],
      },
    ],
  },
  'test',
);
const model = catalog.get('t/m')!;

function route(
  preferences: ProviderPreferences = {},
  options: { suffixes?: Suffix[]; parameters?: string[]; stats?: ProviderStats; of?: CatalogModel } = {},
): string[] {
  return routeTargets(
    options.of ?? model,
    { preferences, suffixes: options.suffixes ?? [], parameters: options.parameters ?? ['model', 'messages'] },
    options.stats ?? new ProviderStats(),
  ).map((r) => r.provider.name);
}

/** a fast (200 tokens/s, 400 ms to first token), b slow (20 tokens/s, 50 ms), c unmeasured, d medium (100 tokens/s, 100 ms). */
function measured(): ProviderStats {
  const stats = new ProviderStats();
  stats.record('t/m', 'a', { latencyMs: 900, ttftMs: 400, completionTokens: 100 });
  stats.record('t/m', 'b', { latencyMs: 5050, ttftMs: 50, completionTokens: 100 });
  stats.record('t/m', 'd', { latencyMs: 1100, ttftMs: 100, completionTokens: 100 });
  return stats;
}

describe('routeTargets', () => {
  it('keeps catalog order without preferences', () => {
    expect(route()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('only / ignore filter by provider name', () => {
    expect(route({ only: ['d', 'b'] })).toEqual(['b', 'd']);
    expect(route({ ignore: ['a', 'c'] })).toEqual(['b', 'd']);
    expect(route({ only: ['a', 'b'], ignore: ['a'] })).toEqual(['b']);
  });

  it('quantizations, data_collection deny and zdr filter on the route flags', () => {
    expect(route({ quantizations: ['fp8', 'bf16'] })).toEqual(['b', 'c']);
    expect(route({ data_collection: 'deny' })).toEqual(['b', 'd']);
    expect(route({ data_collection: 'allow' })).toEqual(['a', 'b', 'c', 'd']);
    expect(route({ zdr: true })).toEqual(['b']);
    expect(route({ zdr: false })).toEqual(['a', 'b', 'c', 'd']);
  });

  it('require_parameters drops routes without tool calls only when the request uses tools', () => {
    expect(route({ require_parameters: true }, { parameters: ['model', 'messages', 'tools'] })).toEqual(['b', 'c', 'd']);
    expect(route({ require_parameters: true }, { parameters: ['model', 'messages', 'tool_choice'] })).toEqual(['b', 'c', 'd']);
    expect(route({ require_parameters: true }, { parameters: ['model', 'messages', 'max_tokens'] })).toEqual(['a', 'b', 'c', 'd']);
    expect(route({}, { parameters: ['model', 'messages', 'tools'] })).toEqual(['a', 'b', 'c', 'd']);
  });

  it('order puts the named providers first, in that order, the rest after in their order', () => {
    expect(route({ order: ['d', 'c'] })).toEqual(['d', 'c', 'a', 'b']);
    expect(route({ order: ['unknown', 'b'] })).toEqual(['b', 'a', 'c', 'd']);
  });

  it('sort price: cheapest input plus output first', () => {
    expect(route({ sort: 'price' })).toEqual(['c', 'a', 'b', 'd']);
  });

  it('sort throughput: highest measured tokens/s first, unmeasured last in catalog order', () => {
    expect(route({ sort: 'throughput' }, { stats: measured() })).toEqual(['a', 'd', 'b', 'c']);
    // Nothing measured yet: catalog order.
    expect(route({ sort: 'throughput' })).toEqual(['a', 'b', 'c', 'd']);
  });

  it('sort latency: lowest time to first token first, unmeasured last', () => {
    expect(route({ sort: 'latency' }, { stats: measured() })).toEqual(['b', 'd', 'a', 'c']);
  });

  it('sort latency falls back to whole-request latency where no stream was measured', () => {
    const stats = new ProviderStats();
    stats.record('t/m', 'a', { latencyMs: 800, ttftMs: null, completionTokens: 10 });
    stats.record('t/m', 'b', { latencyMs: 300, ttftMs: null, completionTokens: 10 });
    expect(route({ sort: 'latency' }, { stats })).toEqual(['b', 'a', 'c', 'd']);
  });

  it('order wins over sort; sort orders the rest', () => {
    expect(route({ sort: 'price', order: ['d'] })).toEqual(['d', 'c', 'a', 'b']);
  });

  it('allow_fallbacks false keeps only the first route', () => {
    expect(route({ allow_fallbacks: false })).toEqual(['a']);
    expect(route({ allow_fallbacks: false, sort: 'price' })).toEqual(['c']);
    expect(route({ allow_fallbacks: true })).toEqual(['a', 'b', 'c', 'd']);
  });

  it('answers 404 no_provider_available naming the model when nothing remains', () => {
    const err = errorOf(() => route({ only: ['b'], quantizations: ['int8'] }));
    expect(err).toMatchObject({ status: 404, code: 'no_provider_available', param: 'provider' });
    expect(err.message).toContain('No provider of t/m matches the provider preferences');
  });

  it(':nitro sorts by throughput, :floor by price', () => {
    expect(route({}, { suffixes: ['nitro'], stats: measured() })).toEqual(['a', 'd', 'b', 'c']);
    expect(route({}, { suffixes: ['floor'] })).toEqual(['c', 'a', 'b', 'd']);
  });

  it('an explicit sort wins over the suffix', () => {
    expect(route({ sort: 'price' }, { suffixes: ['nitro'], stats: measured() })).toEqual(['c', 'a', 'b', 'd']);
  });

  it(':exacto keeps only routes with tool calls, cheapest first', () => {
    expect(route({}, { suffixes: ['exacto'] })).toEqual(['c', 'b', 'd']);
    expect(errorOf(() => route({}, { suffixes: ['exacto'], of: catalog.get('t/plain')! }))).toMatchObject({
      status: 404,
      code: 'no_provider_available',
      param: 'model',
    });
  });
});

describe('parseModelId', () => {
  it('splits the suffixes off the id', () => {
    expect(parseModelId('t/m')).toEqual({ id: 't/m', suffixes: [] });
    expect(parseModelId('t/m:nitro')).toEqual({ id: 't/m', suffixes: ['nitro'] });
    expect(parseModelId('t/m:exacto:thinking')).toEqual({ id: 't/m', suffixes: ['exacto', 'thinking'] });
  });

  it('an unknown suffix is a 404 like an unknown model', () => {
    expect(errorOf(() => parseModelId('t/m:turbo'))).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
    expect(errorOf(() => parseModelId('t/m:'))).toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it(':online is a suffix like the others (spec 4.2 rule 7: the web plugin)', () => {
    expect(parseModelId('t/m:online:nitro')).toEqual({ id: 't/m', suffixes: ['online', 'nitro'] });
  });

  it(':nitro and :floor together are a 400', () => {
    expect(errorOf(() => parseModelId('t/m:nitro:floor'))).toMatchObject({ status: 400, param: 'model' });
  });
});

describe('suffixFields (:thinking)', () => {
  it('turns reasoning on at medium effort unless the request says how', () => {
    expect(suffixFields(model, ['thinking'], {})).toEqual({ reasoning: { effort: 'medium' } });
    expect(suffixFields(model, ['thinking'], { reasoning: { effort: 'high' } })).toEqual({});
    expect(suffixFields(model, ['thinking'], { reasoning_effort: 'low' })).toEqual({});
    expect(suffixFields(model, ['nitro'], {})).toEqual({});
  });

  it('is a 400 for a model that cannot reason', () => {
    expect(errorOf(() => suffixFields(catalog.get('t/plain')!, ['thinking'], {}))).toMatchObject({
      status: 400,
      code: 'unsupported_parameter',
      param: 'model',
    });
  });
});

describe('parseProviderPreferences', () => {
  it('accepts every member and leaves out what was not given', () => {
    const all = {
      order: ['a'],
      only: ['a', 'b'],
      ignore: ['c'],
      allow_fallbacks: false,
      sort: 'latency',
      require_parameters: true,
      data_collection: 'deny',
      quantizations: ['fp8'],
      zdr: true,
    };
    expect(parseProviderPreferences(all)).toEqual(all);
    expect(parseProviderPreferences({ sort: 'price' })).toEqual({ sort: 'price' });
    expect(parseProviderPreferences(undefined)).toEqual({});
    expect(parseProviderPreferences(null)).toEqual({});
  });

  it.each([
    [[], 'provider'],
    ['price', 'provider'],
    [{ sort: 'fastest' }, 'provider.sort'],
    [{ order: 'a' }, 'provider.order'],
    [{ only: [1] }, 'provider.only'],
    [{ ignore: [''] }, 'provider.ignore'],
    [{ allow_fallbacks: 'no' }, 'provider.allow_fallbacks'],
    [{ require_parameters: 1 }, 'provider.require_parameters'],
    [{ data_collection: 'never' }, 'provider.data_collection'],
    [{ quantizations: ['fp9'] }, 'provider.quantizations'],
    [{ zdr: 'yes' }, 'provider.zdr'],
    [{ max_price: { prompt: 1 } }, 'provider.max_price'],
  ])('refuses %j with a 400 naming %s', (value, param) => {
    expect(errorOf(() => parseProviderPreferences(value))).toMatchObject({ status: 400, type: 'invalid_request_error', param });
  });
});

describe('requestParameters', () => {
  it('lists the fields given, not null ones or empty lists', () => {
    expect(requestParameters({ model: 'x', tools: [], tool_choice: null, max_tokens: 5, seed: undefined })).toEqual(['model', 'max_tokens']);
  });
});

describe("routeTargetsWithin: routing under the caller's guardrails (issue 44)", () => {
  /** Guardrails that allow every model but t/plain and leave only zero-data-retention endpoints. */
  const zdrOnly: RoutingAccess = {
    refuseModel: (id) => (id === 't/plain' ? new DomainError('model_not_allowed', 'not allowed', { param: 'model' }, 'forbidden') : null),
    narrow: (preferences) => ({ ...preferences, zdr: true }),
    noEndpoint: (id) => new DomainError('no_endpoint_allowed', `none of ${id}`, { param: 'model' }, 'forbidden'),
  };
  const within = (preferences: ProviderPreferences, access: RoutingAccess | null, of = model) =>
    routeTargetsWithin(of, { preferences, suffixes: [], parameters: ['model', 'messages'] }, new ProviderStats(), access).map((r) => r.provider.name);

  it('without guardrails routes as routeTargets does', () => {
    expect(within({ ignore: ['a'] }, null)).toEqual(route({ ignore: ['a'] }));
  });

  it("routes over what the guardrails leave of the request's own preferences", () => {
    expect(within({}, zdrOnly)).toEqual(['b']);
    expect(within({ ignore: ['c'] }, zdrOnly)).toEqual(['b']);
  });

  it('refuses a model the guardrails do not allow before routing', () => {
    expect(errorOf(() => within({}, zdrOnly, catalog.get('t/plain')!))).toMatchObject({ code: 'model_not_allowed' });
  });

  it("403 no_endpoint_allowed when only the guardrails leave nothing; 404 when the request's own preferences already leave nothing", () => {
    expect(errorOf(() => within({ only: ['a', 'c'] }, zdrOnly))).toMatchObject({ code: 'no_endpoint_allowed' });
    expect(errorOf(() => within({ only: ['b'], quantizations: ['int8'] }, zdrOnly))).toMatchObject({ status: 404, code: 'no_provider_available' });
  });
});
