import { Module } from '@nestjs/common';
import { BatchLineCalls, BatchLineEndpoints } from '@svc/batches';
import { BillingModule, ChatCompletions, Embeddings } from '@svc/billing';
import { ManagementModule } from '@svc/management';
import { CLOCK, type Clock, READ_DB, type SqlRunner } from '@svc/platform';
import { callerOfKey } from '@svc/identity';
import { Metering } from '@svc/metering';
import { VideoCalls } from '@svc/videos';

/**
 * The metered pipeline and the use cases jobs run (batch lines, videos), without the HTTP edge:
 * the gateway serves requests with them, and every worker runs the jobs with the same ones.
 * Composition only, so it lives with the other composition roots: the worker takes it from
 * here and imports nothing of the gateway app itself.
 */
@Module({
  // Management, and identity's command handlers with it, in every process that runs jobs (the worker too).
  imports: [ManagementModule, BillingModule],
  providers: [
    {
      provide: BatchLineCalls,
      inject: [Metering, ChatCompletions, Embeddings, READ_DB, CLOCK],
      useFactory: (metering: Metering, chat: ChatCompletions, embeddings: Embeddings, sql: SqlRunner, clock: Clock) =>
        new BatchLineCalls({
          calls: metering.calls,
          endpoints: new BatchLineEndpoints({ chat, embeddings, clock }),
          callerOf: (keyId) => callerOfKey(sql, keyId, clock.now()),
        }),
    },
    {
      provide: VideoCalls,
      inject: [Metering, READ_DB, CLOCK],
      useFactory: (metering: Metering, sql: SqlRunner, clock: Clock) =>
        new VideoCalls({
          calls: metering.calls,
          clock,
          sealedProviderKeys: async (keyId) => (await callerOfKey(sql, keyId, clock.now()))?.sealedProviderKeys ?? new Map(),
        }),
    },
  ],
  exports: [BillingModule, BatchLineCalls, VideoCalls],
})
export class JobWorkModule {}
