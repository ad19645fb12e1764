import { Logger, type Provider } from '@nestjs/common';
import { CATALOG, type Catalog } from '@svc/catalog';
import { CLOCK, type Clock, CONFIG, type Config, READ_DB, type SqlRunner } from '@svc/platform';
import { forgetProgress, PROGRESS_INTERVAL_MS, recordProgress } from '@svc/ledger';
import { Metering } from '@svc/metering';
import { midStreamError } from './api-errors';
import { ChatCompletions } from './chat';
import { LegacyCompletions } from './completions';
import { Embeddings } from './embeddings';
import { Messages } from './messages';
import { Responses } from './responses';

/** The billed use cases, on this process's pipeline, database and configuration. */
export const BILLING_PROVIDERS: Provider[] = [
  {
    provide: ChatCompletions,
    inject: [Metering, CATALOG, CLOCK, CONFIG, READ_DB],
    useFactory: (metering: Metering, catalog: Catalog, clock: Clock, config: Config, sql: SqlRunner) =>
      new ChatCompletions({
        calls: metering.calls,
        catalog,
        clock,
        providerStats: metering.providerStats,
        encryptionKey: () => config.encryptionKey,
        streamStallMs: config.streamStallMs,
        progress: { record: (progress) => recordProgress(sql, progress), forget: (holdId) => forgetProgress(sql, holdId) },
        progressIntervalMs: PROGRESS_INTERVAL_MS,
        streamError: (failure) => midStreamError(failure, clock.now()).toBody(),
        log: new Logger('chat'),
      }),
  },
  { provide: Embeddings, inject: [Metering], useFactory: (metering: Metering) => new Embeddings({ calls: metering.calls, routing: metering.routing }) },
  { provide: Messages, inject: [ChatCompletions], useFactory: (chat: ChatCompletions) => new Messages(chat, new Logger('interfaces')) },
  {
    provide: LegacyCompletions,
    inject: [ChatCompletions, CLOCK],
    useFactory: (chat: ChatCompletions, clock: Clock) => new LegacyCompletions(chat, clock, new Logger('interfaces')),
  },
  {
    provide: Responses,
    inject: [ChatCompletions, CLOCK, CONFIG, READ_DB],
    useFactory: (chat: ChatCompletions, clock: Clock, config: Config, sql: SqlRunner) =>
      new Responses(chat, { clock, sql, encryptionKey: () => config.encryptionKey, log: new Logger('responses') }),
  },
];
