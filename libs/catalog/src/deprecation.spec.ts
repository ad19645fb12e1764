import { refusalOf } from '@svc/platform';
import { errorOf } from '@svc/platform/testing/errors';
import { Catalog, parseCatalog } from './catalog';
import { deprecationAt, deprecationNoticesDue, modelNotFound, resolveModel } from './deprecation';

type Deprecation = { sunset: string; replacement: string | null; announced?: string };
const model = (id: string, deprecation?: Deprecation, type = 'chat') => ({
  id,
  type,
  context_length: 1000,
  pricing: { input: 1, output: 1 },
  providers: [{ provider: 'up', upstream_model: id }],
  ...(deprecation ? { deprecation } : {}),
});
const catalogOf = (...models: ReturnType<typeof model>[]) => parseCatalog({ providers: { up: { adapter: 'openai', base_url: 'simulator' } }, models }, 'test');
const at = (iso: string) => new Date(iso);
const unix = (iso: string) => `@${Date.parse(iso) / 1000}`;

describe('resolveModel', () => {
  const catalog = catalogOf(
    model('t/live'),
    model('t/old', { sunset: '2026-12-01T00:00:00Z', replacement: 't/live', announced: '2026-11-01T00:00:00Z' }),
    model('t/quiet', { sunset: '2026-12-01T00:00:00Z', replacement: null }),
    model('t/later', { sunset: '2026-12-20T00:00:00Z', replacement: 't/live', announced: '2026-11-20T00:00:00Z' }),
    // A chain: a -> b -> c, each retired in turn; c has no replacement.
    model('t/a', { sunset: '2026-06-01T00:00:00Z', replacement: 't/b' }),
    model('t/b', { sunset: '2026-09-01T00:00:00Z', replacement: 't/c' }),
    model('t/c', { sunset: '2027-01-01T00:00:00Z', replacement: null, announced: '2026-08-01T00:00:00Z' }),
    model('t/embed', undefined, 'embedding'),
  );

  it('answers with a model that is not deprecated, without headers', () => {
    expect(resolveModel(catalog, 't/live', at('2026-11-15T00:00:00Z'))).toEqual({ model: catalog.get('t/live'), redirectedFrom: null, headers: {} });
  });

  it('before the announcement, a scheduled retirement is not shown', () => {
    const now = at('2026-11-19T23:59:59Z');
    expect(resolveModel(catalog, 't/later', now)).toEqual({ model: catalog.get('t/later'), redirectedFrom: null, headers: {} });
    expect(deprecationAt(catalog.get('t/later')!, now)).toBeNull();
  });

  it('between announcement and sunset, the model answers with Deprecation (the announcement), Sunset and the replacement', () => {
    expect(resolveModel(catalog, 't/old', at('2026-11-15T00:00:00Z'))).toEqual({
      model: catalog.get('t/old'),
      redirectedFrom: null,
      headers: { deprecation: unix('2026-11-01T00:00:00Z'), sunset: 'Tue, 01 Dec 2026 00:00:00 GMT', 'x-svc-model-replacement': 't/live' },
    });
  });

  it('without an announcement date, Deprecation carries the sunset, and no replacement header when there is none', () => {
    expect(resolveModel(catalog, 't/quiet', at('2026-01-01T00:00:00Z')).headers).toEqual({
      deprecation: unix('2026-12-01T00:00:00Z'),
      sunset: 'Tue, 01 Dec 2026 00:00:00 GMT',
    });
  });

  it('from the sunset instant on, the replacement answers with x-svc-model-redirected-from', () => {
    expect(resolveModel(catalog, 't/old', at('2026-11-30T23:59:59.999Z')).model.id).toBe('t/old');
    expect(resolveModel(catalog, 't/old', at('2026-12-01T00:00:00Z'))).toEqual({
      model: catalog.get('t/live'),
      redirectedFrom: 't/old',
      headers: { 'x-svc-model-redirected-from': 't/old' },
    });
  });

  it('after the sunset without a replacement: 410 model_retired saying when and what to use', () => {
    const err = errorOf(() => resolveModel(catalog, 't/quiet', at('2026-12-01T00:00:00Z')));
    expect(err.toBody()).toEqual({
      error: {
        message:
          "The model 't/quiet' was retired on 2026-12-01T00:00:00.000Z and has no replacement. Use another model: GET /v1/models lists the models this key can use.",
        type: 'model_retired',
        code: 'model_retired',
        param: 'model',
      },
    });
    expect(err.status).toBe(410);
  });

  it('follows a chain of replacements to the first that still answers, with its own notices', () => {
    // b answers for a; b is deprecated (no announcement date) in favour of c.
    expect(resolveModel(catalog, 't/a', at('2026-07-01T00:00:00Z'))).toEqual({
      model: catalog.get('t/b'),
      redirectedFrom: 't/a',
      headers: {
        deprecation: unix('2026-09-01T00:00:00Z'),
        sunset: 'Tue, 01 Sep 2026 00:00:00 GMT',
        'x-svc-model-replacement': 't/c',
        'x-svc-model-redirected-from': 't/a',
      },
    });
    expect(resolveModel(catalog, 't/a', at('2026-10-01T00:00:00Z'))).toEqual({
      model: catalog.get('t/c'),
      redirectedFrom: 't/a',
      headers: { deprecation: unix('2026-08-01T00:00:00Z'), sunset: 'Fri, 01 Jan 2027 00:00:00 GMT', 'x-svc-model-redirected-from': 't/a' },
    });
  });

  it('a chain whose every model is retired ends in 410 naming the last successor', () => {
    const err = errorOf(() => resolveModel(catalog, 't/a', at('2027-01-01T00:00:00Z')));
    expect(err.status).toBe(410);
    expect(err.message).toBe(
      "The model 't/a' was retired on 2026-06-01T00:00:00.000Z; its successor 't/c' was retired on 2027-01-01T00:00:00.000Z and has no replacement. Use another model: GET /v1/models lists the models this key can use.",
    );
  });

  it('a loop of replacements (which parseCatalog refuses) ends in 410 instead of spinning', () => {
    const [x, y] = catalogOf(model('t/x'), model('t/y')).models;
    const sunset = at('2026-01-01T00:00:00Z');
    const looping = new Catalog([
      { ...x, deprecation: { sunset, replacement: 't/y', announced: null } },
      { ...y, deprecation: { sunset, replacement: 't/x', announced: null } },
    ]);
    const err = errorOf(() => resolveModel(looping, 't/x', at('2026-02-01T00:00:00Z')));
    expect(err.status).toBe(410);
    expect(err.message).toContain("its successor 't/y' was retired on 2026-01-01T00:00:00.000Z and loops back to 't/x'");
  });

  it('an unknown model and one the key may not use are the same 404; one of another type is a 400 naming model (issue 15.5)', () => {
    const now = at('2026-11-15T00:00:00Z');
    expect(errorOf(() => resolveModel(catalog, 't/nope', now)).toBody()).toEqual(refusalOf(modelNotFound('t/nope'))!.toBody());
    expect(errorOf(() => resolveModel(catalog, 't/old', now, { allowedModels: ['t/live'] })).toBody()).toEqual(refusalOf(modelNotFound('t/old'))!.toBody());
    expect(errorOf(() => resolveModel(catalog, 't/embed', now, { type: 'chat' })).toBody().error).toMatchObject({
      type: 'invalid_request_error',
      code: 'model_type_mismatch',
      param: 'model',
    });
    // Not allowed wins over the wrong type: the key learns nothing of a model it may not use.
    expect(errorOf(() => resolveModel(catalog, 't/embed', now, { type: 'chat', allowedModels: ['t/live'] })).toBody()).toEqual(
      refusalOf(modelNotFound('t/embed'))!.toBody(),
    );
    expect(resolveModel(catalog, 't/old', now, { allowedModels: ['t/old'], type: 'chat' }).model.id).toBe('t/old');
  });

  it('never redirects a key to a replacement it may not use: 410 naming the replacement', () => {
    const err = errorOf(() => resolveModel(catalog, 't/old', at('2026-12-02T00:00:00Z'), { allowedModels: ['t/old'] }));
    expect(err.status).toBe(410);
    expect(err.message).toContain("was retired on 2026-12-01T00:00:00.000Z and is replaced by 't/live', which this key may not use");
    expect(resolveModel(catalog, 't/old', at('2026-12-02T00:00:00Z'), { allowedModels: ['t/old', 't/live'] }).model.id).toBe('t/live');
  });
});

describe('deprecationNoticesDue', () => {
  const due = (catalog: Catalog, iso: string) => deprecationNoticesDue(catalog, at(iso)).map((n) => `${n.model}:${n.kind}`);

  it('announces at the announcement, again from a week before the sunset, and stops at the sunset', () => {
    const catalog = catalogOf(model('t/live'), model('t/old', { sunset: '2026-12-01T00:00:00Z', replacement: 't/live', announced: '2026-11-01T00:00:00Z' }));
    expect(due(catalog, '2026-10-31T23:59:59Z')).toEqual([]);
    expect(due(catalog, '2026-11-01T00:00:00Z')).toEqual(['t/old:announced']);
    expect(due(catalog, '2026-11-23T23:59:59Z')).toEqual(['t/old:announced']);
    expect(due(catalog, '2026-11-24T00:00:00Z')).toEqual(['t/old:announced', 't/old:final']);
    expect(due(catalog, '2026-12-01T00:00:00Z')).toEqual([]);
    expect(deprecationNoticesDue(catalog, at('2026-11-24T00:00:00Z'))[1]).toEqual({
      id: 'model.deprecated:t/old:final:2026-12-01T00:00:00.000Z',
      kind: 'final',
      model: 't/old',
      name: 't/old',
      sunset: at('2026-12-01T00:00:00Z'),
      replacement: 't/live',
    });
  });

  it('an announcement within the last week is the only notice; without a date the announcement is due at once', () => {
    const late = catalogOf(model('t/late', { sunset: '2026-12-01T00:00:00Z', replacement: null, announced: '2026-11-28T00:00:00Z' }));
    expect(due(late, '2026-11-29T00:00:00Z')).toEqual(['t/late:announced']);
    const undated = catalogOf(model('t/undated', { sunset: '2026-12-01T00:00:00Z', replacement: null }));
    expect(due(undated, '2026-01-01T00:00:00Z')).toEqual(['t/undated:announced']);
    expect(due(undated, '2026-11-29T00:00:00Z')).toEqual(['t/undated:announced', 't/undated:final']);
  });
});
