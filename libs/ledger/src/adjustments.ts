import type { EventStore, RecordedEvent } from '@svc/eventstore';
import { accountStream, type BalanceAdjustedData } from './account';

/**
 * The recorded BalanceAdjusted of `adjustmentId` (issue 23), newest first: a retry of a recent
 * correction finds it in the first page. Its metadata.at is when it was made.
 */
export async function findAdjustment(
  store: EventStore,
  accountId: string,
  adjustmentId: string,
  pageSize = 200,
): Promise<RecordedEvent<'BalanceAdjusted', BalanceAdjustedData> | null> {
  for (let from: bigint | undefined; ;) {
    const page = await store.readStream(accountStream(accountId), {
      direction: 'backwards',
      maxCount: pageSize,
      ...(from === undefined ? {} : { fromRevision: from }),
    });
    for (const event of page) {
      if (event.type === 'BalanceAdjusted' && (event.data as BalanceAdjustedData).adjustment_id === adjustmentId)
        return event as RecordedEvent<'BalanceAdjusted', BalanceAdjustedData>;
    }
    if (page.length < pageSize || page[page.length - 1].revision === 0n) return null;
    from = page[page.length - 1].revision - 1n;
  }
}
