import { CatalogError, loadCatalog, parseCatalog } from './catalog';

describe('catalog', () => {
  it('the built-in catalog has the simulated models with non-zero prices, cached input included', () => {
    const catalog = loadCatalog();
    for (const id of ['sim/echo', 'sim/small-8k', 'sim/embed']) {
      const m = catalog.get(id);
      expect(m).toBeDefined();
      expect(m!.prices.inputPerM).toBeGreaterThan(0n);
      expect(m!.prices.cachedInputPerM).toBeGreaterThan(0n);
      expect(m!.prices.cachedInputPerM).toBeLessThan(m!.prices.inputPerM);
    }
    expect(catalog.get('sim/echo')!.prices.outputPerM).toBe(8_000_000_000n);
    expect(catalog.get('sim/small-8k')!.contextLength).toBe(8192);
    expect(catalog.usesSimulator()).toBe(true);
  });

  const base = {
    providers: { up: { adapter: 'openai', base_url: 'https://api.example.com/v1', api_key_env: 'UP_KEY' } },
    models: [{ id: 'x/m', type: 'chat', context_length: 1000, pricing: { input: 1, output: '2.5' }, providers: [{ provider: 'up', upstream_model: 'm' }] }],
  };

  it('reads keys from the environment and defaults the cached price to the input price', () => {
    const m = parseCatalog(base, 'test', { UP_KEY: 'sk-1' }).get('x/m')!;
    expect(m.providers[0].provider.apiKey).toBe('sk-1');
    expect(m.prices).toEqual({ inputPerM: 1_000_000_000n, outputPerM: 2_500_000_000n, cachedInputPerM: 1_000_000_000n });
  });

  it.each([
    [{ ...base, models: [{ ...base.models[0], pricing: { input: 'cheap', output: 1 } }] }, 'models[0].pricing.input'],
    [{ ...base, models: [{ ...base.models[0], providers: [{ provider: 'nope', upstream_model: 'm' }] }] }, 'unknown provider nope'],
    [{ ...base, models: [base.models[0], base.models[0]] }, 'duplicate id x/m'],
    [{ ...base, models: [{ ...base.models[0], context_length: 0 }] }, 'models[0].context_length'],
  ])('names the place of a mistake (%#)', (doc, message) => {
    expect(() => parseCatalog(doc, 'test', { UP_KEY: 'k' })).toThrow(CatalogError);
    expect(() => parseCatalog(doc, 'test', { UP_KEY: 'k' })).toThrow(message);
  });

  it('refuses a provider whose key variable is unset', () => {
    expect(() => parseCatalog(base, 'test', {})).toThrow('UP_KEY is not set');
  });
});
