import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What the metering pipeline learned while serving one HTTP request, for its log line (issue
 * 22): the provider that answered, the time spent upstream and what was charged. Streams settle
 * after their headers are sent, so the line is written from this record when the response ends.
 */
export interface RequestRecord {
  /** The last provider that answered (`<name>:byok` on the account's own key). */
  provider?: string;
  /** The last provider that failed, when none answered after it. */
  failedProvider?: string;
  upstreamSeconds: number;
  chargedNano: bigint;
  charged: boolean;
}

/**
 * The record of the request being served, carried by the request's async context: the pipeline
 * reports to one observer per process, and this finds the request a report belongs to. Work
 * outside a request (a batch line, a video job) has no record and is not noted.
 */
export class RequestScope {
  private readonly storage = new AsyncLocalStorage<RequestRecord>();

  static record(): RequestRecord {
    return { upstreamSeconds: 0, chargedNano: 0n, charged: false };
  }

  /** Runs `fn` (and everything it starts) with `record` as the current request's. */
  run<T>(record: RequestRecord, fn: () => T): T {
    return this.storage.run(record, fn);
  }

  current(): RequestRecord | undefined {
    return this.storage.getStore();
  }

  upstreamAnswered(provider: string, seconds: number): void {
    const record = this.storage.getStore();
    if (!record) return;
    record.provider = provider;
    record.failedProvider = undefined;
    record.upstreamSeconds += seconds;
  }

  upstreamFailed(provider: string, seconds: number): void {
    const record = this.storage.getStore();
    if (!record) return;
    record.failedProvider = provider;
    record.upstreamSeconds += seconds;
  }

  charged(amountNano: bigint): void {
    const record = this.storage.getStore();
    if (!record) return;
    record.charged = true;
    record.chargedNano += amountNano;
  }
}
