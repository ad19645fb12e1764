import { setTimeout as sleep } from 'node:timers/promises';

/** Polls `probe` until it gives a truthy value, which it resolves with; rejects naming `what` after the timeout. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 15_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * Awaits `starts` side by side, as a deployment's processes start (each spends seconds loading its
 * modules). Whatever did start is handed to `keep` first, so that afterAll can stop it even when
 * another start failed; then the first failure is thrown.
 */
export async function startSideBySide<T extends readonly unknown[]>(
  starts: readonly [...{ [K in keyof T]: PromiseLike<T[K]> }],
  keep: (started: { [K in keyof T]: T[K] | undefined }) => void,
): Promise<void> {
  const outcomes = await Promise.allSettled(starts);
  keep(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : undefined)) as { [K in keyof T]: T[K] | undefined });
  const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed) throw failed.reason;
}
