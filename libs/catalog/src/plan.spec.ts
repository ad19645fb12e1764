import { errorOf } from '@svc/platform/testing/errors';
import { parseCatalog } from './catalog';
import { defaultModelOf, planModels, type PlanContext } from './plan';
import { ProviderStats } from './provider-stats';

const catalog = parseCatalog(
  {
    providers: Object.fromEntries(['a', 'b', 'c'].map((p) => [p, { adapter: 'openai', base_url: 'simulator' }])),
    models: [
      {
        id: 't/main',
        type: 'chat',
        context_length: 1000,
        supported_parameters: ['max_tokens', 'tools', 'reasoning'],
        pricing: { input: 1, output: 4 },
        providers: [
          { provider: 'a', upstream_model: 'a-main', pricing: { input: 3, output: 12 } },
          { provider: 'b', upstream_model: 'b-main', pricing: { input: 0.5, output: 2 } },
        ],
      },
      { id: 't/only-c', type: 'chat', context_length: 1000, pricing: { input: 1, output: 1 }, providers: [{ provider: 'c', upstream_model: 'c' }] },
      {
        id: 't/old',
        type: 'chat',
        context_length: 1000,
        pricing: { input: 1, output: 1 },
        providers: [{ provider: 'a', upstream_model: 'old' }],
        deprecation: { sunset: '2026-12-01T00:00:00Z', replacement: 't/main' },
      },
      { id: 't/embed', type: 'embedding', context_length: 1000, pricing: { input: 1, output: 0 }, providers: [{ provider: 'a', upstream_model: 'e' }] },
    ],
  },
  'test',
);

const context = (over: Partial<PlanContext> = {}): PlanContext => ({
  now: new Date('2026-11-15T00:00:00Z'),
  type: 'chat',
  stats: new ProviderStats(),
  ...over,
});
const routesOf = (plan: ReturnType<typeof planModels>) => plan.models.map((m) => `${m.model.id}:${m.routes.map((r) => r.provider.name).join('+')}`);

describe('planModels', () => {
  it('routes the primary model, then each fallback of models, in order', () => {
    expect(routesOf(planModels(catalog, { model: 't/main', models: ['t/only-c'] }, context()))).toEqual(['t/main:a+b', 't/only-c:c']);
  });

  it('applies a suffix to its own model only: :floor sorts t/main by price, the fallback keeps catalog order', () => {
    expect(routesOf(planModels(catalog, { model: 't/main:floor', models: ['t/only-c'] }, context()))).toEqual(['t/main:b+a', 't/only-c:c']);
  });

  it('adds the fields of :thinking to that model, unless the request says how to reason', () => {
    expect(planModels(catalog, { model: 't/main:thinking' }, context()).models[0].fields).toEqual({ reasoning: { effort: 'medium' } });
    const told = { model: 't/main:thinking', reasoning: { effort: 'high' } };
    expect(planModels(catalog, told, context()).models[0].fields).toEqual({});
  });

  it('leaves out a fallback the provider preferences leave no provider for, but refuses such a primary', () => {
    const onlyA = { provider: { only: ['a'] } };
    expect(routesOf(planModels(catalog, { model: 't/main', models: ['t/only-c'], ...onlyA }, context()))).toEqual(['t/main:a']);
    expect(errorOf(() => planModels(catalog, { model: 't/only-c', ...onlyA }, context())).code).toBe('no_provider_available');
  });

  it('names the entry of models at fault', () => {
    const err = errorOf(() => planModels(catalog, { model: 't/main', models: ['t/only-c', 't/nope'] }, context()));
    expect([err.status, err.code, err.param]).toEqual([404, 'model_not_found', 'models[1]']);
  });

  it('tries a model named twice once', () => {
    expect(routesOf(planModels(catalog, { model: 't/main', models: ['t/main:floor', 't/only-c'] }, context()))).toEqual(['t/main:a+b', 't/only-c:c']);
  });

  it("answers a retired model through its replacement, with the requested model's headers", () => {
    const plan = planModels(catalog, { model: 't/old' }, context({ now: new Date('2026-12-02T00:00:00Z') }));
    expect(routesOf(plan)).toEqual(['t/main:a+b']);
    expect(plan.headers['x-svc-model-redirected-from']).toBe('t/old');
  });

  it('keeps to the models the key may use and to the endpoint type', () => {
    expect(errorOf(() => planModels(catalog, { model: 't/main' }, context({ allowedModels: ['t/only-c'] }))).code).toBe('model_not_found');
    expect(errorOf(() => planModels(catalog, { model: 't/embed' }, context())).code).toBe('model_type_mismatch');
  });
});

describe('defaultModelOf', () => {
  it("is the catalog's first model of the type the key may use", () => {
    expect(defaultModelOf(catalog, 'chat')).toBe('t/main');
    expect(defaultModelOf(catalog, 'chat', ['t/only-c'])).toBe('t/only-c');
    expect(errorOf(() => defaultModelOf(catalog, 'search')).status).toBe(404);
  });
});
