import type { Upcaster } from '@svc/eventstore';
import { meteredUsage } from './events';

/**
 * The ledger's upcaster, given to the event store at the composition root: a charge recorded
 * before meters existed (UsageCharged or UsageCorrected without `usage`) is read with its tokens
 * as the meters `input`, `cached_input` and `output`. The log is never rewritten, and no reader
 * of the log derives the meters again.
 */
export const upcastAccountEvent: Upcaster = (event) => {
  if (event.type !== 'UsageCharged' && event.type !== 'UsageCorrected') return event;
  const data = event.data as Parameters<typeof meteredUsage>[0];
  if (data.usage !== undefined) return event;
  return { ...event, data: { ...data, usage: meteredUsage(data) } };
};
