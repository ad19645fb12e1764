import { eventFilter } from '../common';
import type { AppendHint, ReadAllOptions, RecordedEvent, SubscribeOptions, Subscription } from '../port';
import { START } from '../position';

/** Events a subscription reads per round trip. */
const SUBSCRIPTION_BATCH = 256;

/** What a subscription reads from and is woken by: the store itself. */
export interface SubscriptionSource {
  readAll(options: ReadAllOptions): Promise<RecordedEvent[]>;
  watchAppends(listener: (hint: AppendHint) => void): () => void;
}

/**
 * Catch-up and live are the same loop: read a batch after the last position, hand the
 * events over one by one, and when the batch was not full wait for a wake-up
 * (watchAppends) or the poll interval. Filtered-out events advance the position too.
 * Any error, the handler's or a read's, stops the subscription and goes to `onError`;
 * the caller resubscribes from its own checkpoint.
 */
export function pollingSubscription(
  source: SubscriptionSource,
  pollIntervalMs: number,
  /** The store's running subscriptions: this one is in it until it ends. */
  subscriptions: Set<Subscription>,
  options: SubscribeOptions,
  handler: (event: RecordedEvent) => Promise<void> | void,
  onError: (err: unknown) => void,
): Subscription {
  const matches = eventFilter(options.filter);
  let position = options.after ?? START;
  let stopped = false;
  let signalled = false; // an append was signalled since the last read began
  let wake: (() => void) | undefined;

  const unwatch = source.watchAppends(() => {
    signalled = true;
    wake?.();
  });
  const idle = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, pollIntervalMs);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  const run = async () => {
    while (!stopped) {
      signalled = false;
      const batch = await source.readAll({ after: position, maxCount: SUBSCRIPTION_BATCH });
      for (const event of batch) {
        if (stopped) return;
        if (matches(event)) await handler(event);
        position = event.position;
      }
      if (batch.length < SUBSCRIPTION_BATCH && !signalled && !stopped) await idle();
    }
  };
  const finished = run()
    .catch(onError)
    .finally(() => {
      stopped = true;
      unwatch();
      subscriptions.delete(subscription);
    });
  const subscription: Subscription = {
    stop: async () => {
      stopped = true;
      wake?.();
      await finished;
    },
  };
  subscriptions.add(subscription);
  return subscription;
}
