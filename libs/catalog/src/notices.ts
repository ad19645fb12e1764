/**
 * `model.deprecated` (spec 6.1, 9): each due notice of the catalog is recorded once, as an
 * event on the `catalog-notices` stream, at once and again a week before the sunset. The
 * webhook dispatcher reads these events and decides which accounts hear of them (those that
 * used the model in the last 30 days); the event itself names only the model.
 */
import type { Decider, DomainEvent } from '@svc/eventstore';
import type { DeprecationNotice } from './deprecation';

export const CATALOG_NOTICES_STREAM = 'catalog-notices';

export type ModelDeprecated = DomainEvent<
  'ModelDeprecated',
  {
    notice_id: string;
    kind: DeprecationNotice['kind'];
    model: string;
    name: string;
    /** ISO date-time. */
    sunset: string;
    replacement: string | null;
    /** ISO date-time: when the notice was recorded. */
    noticed_at: string;
  }
>;
export type CatalogNoticeEvent = ModelDeprecated;

/** The notices due now, from `deprecationNoticesDue`; the decider keeps the ones not yet recorded. */
export interface RecordDeprecationNotices {
  type: 'RecordDeprecationNotices';
  due: readonly DeprecationNotice[];
}
export type CatalogNoticeCommand = RecordDeprecationNotices;

export interface CatalogNoticeState {
  recorded: ReadonlySet<string>;
}

export const catalogNoticesDecider: Decider<CatalogNoticeCommand, CatalogNoticeState, CatalogNoticeEvent> = {
  initialState: () => ({ recorded: new Set() }),
  decide(command, state, now) {
    const seen = new Set(state.recorded);
    const events: CatalogNoticeEvent[] = [];
    for (const notice of command.due) {
      // A notice id is stable per model, kind and sunset: recorded once, however often it is due.
      if (seen.has(notice.id)) continue;
      seen.add(notice.id);
      events.push({
        type: 'ModelDeprecated',
        data: {
          notice_id: notice.id,
          kind: notice.kind,
          model: notice.model,
          name: notice.name,
          sunset: notice.sunset.toISOString(),
          replacement: notice.replacement,
          noticed_at: now.toISOString(),
        },
      });
    }
    return events;
  },
  evolve(state, event) {
    return { recorded: new Set([...state.recorded, event.data.notice_id]) };
  },
};
