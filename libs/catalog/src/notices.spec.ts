import { fold } from '@svc/eventstore';
import { parseCatalog } from './catalog';
import { deprecationNoticesDue } from './deprecation';
import { catalogNoticesDecider, type CatalogNoticeEvent } from './notices';

// Spec 6.1 and 9: model.deprecated at once and again a week before the sunset.
const catalog = parseCatalog(
  {
    providers: { up: { adapter: 'openai', base_url: 'simulator' } },
    models: [
      { id: 't/live', type: 'chat', context_length: 1000, pricing: { input: 1, output: 1 }, providers: [{ provider: 'up', upstream_model: 'x' }] },
      {
        id: 't/old',
        type: 'chat',
        context_length: 1000,
        pricing: { input: 1, output: 1 },
        providers: [{ provider: 'up', upstream_model: 'y' }],
        deprecation: { sunset: '2026-12-01T00:00:00Z', replacement: 't/live', announced: '2026-11-01T00:00:00Z' },
      },
    ],
  },
  'test',
);

function given(events: CatalogNoticeEvent[], at: string): CatalogNoticeEvent[] {
  const now = new Date(at);
  return catalogNoticesDecider.decide({ type: 'RecordDeprecationNotices', due: deprecationNoticesDue(catalog, now) }, fold(catalogNoticesDecider, events), now);
}

describe('catalog notices decider', () => {
  it('records nothing before the announcement', () => {
    expect(given([], '2026-10-31T00:00:00Z')).toEqual([]);
  });

  it('records the announcement once, with the model, sunset and replacement', () => {
    const first = given([], '2026-11-02T08:00:00Z');
    expect(first).toEqual([
      {
        type: 'ModelDeprecated',
        data: {
          notice_id: 'model.deprecated:t/old:announced:2026-12-01T00:00:00.000Z',
          kind: 'announced',
          model: 't/old',
          name: 't/old',
          sunset: '2026-12-01T00:00:00.000Z',
          replacement: 't/live',
          noticed_at: '2026-11-02T08:00:00.000Z',
        },
      },
    ]);
    expect(given(first, '2026-11-03T08:00:00Z')).toEqual([]);
  });

  it('records the final notice a week before the sunset, once, and nothing after the sunset', () => {
    const announced = given([], '2026-11-02T00:00:00Z');
    const final = given(announced, '2026-11-24T00:00:00Z');
    expect(final.map((e) => e.data.kind)).toEqual(['final']);
    expect(given([...announced, ...final], '2026-11-25T00:00:00Z')).toEqual([]);
    expect(given([], '2026-12-01T00:00:00Z')).toEqual([]);
  });

  it('a sweeper that was down records both notices when it catches up', () => {
    expect(given([], '2026-11-28T00:00:00Z').map((e) => e.data.kind)).toEqual(['announced', 'final']);
  });

  it('the same notice listed twice in one command is recorded once', () => {
    const due = deprecationNoticesDue(catalog, new Date('2026-11-02T00:00:00Z'));
    const events = catalogNoticesDecider.decide({ type: 'RecordDeprecationNotices', due: [...due, ...due] }, catalogNoticesDecider.initialState(), new Date());
    expect(events).toHaveLength(1);
  });
});
