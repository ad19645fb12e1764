import { Injectable, Module, type BeforeApplicationShutdown } from '@nestjs/common';
import { MeteringModule } from '@svc/metering';
import { BILLING_PROVIDERS } from './billing.providers';
import { ChatCompletions } from './chat';
import { LegacyCompletions } from './completions';
import { Embeddings } from './embeddings';
import { Messages } from './messages';
import { Responses } from './responses';

/** The process's wait for running streams at shutdown. */
@Injectable()
export class ChatStreamsDrain implements BeforeApplicationShutdown {
  constructor(private readonly chat: ChatCompletions) {}

  /**
   * Nest calls this on close, before the runtime (and its database pool) is closed: a stream
   * whose client left is still billed (spec 1 rule 4), so it is let finish rather than leave
   * its hold for the sweeper.
   */
  beforeApplicationShutdown(): Promise<void> {
    return this.chat.drain();
  }
}

/**
 * The billed use cases on the metered pipeline, for a process that calls models (a gateway, a
 * worker running jobs). Needs what MeteringModule needs.
 */
@Module({
  imports: [MeteringModule],
  providers: [...BILLING_PROVIDERS, ChatStreamsDrain],
  exports: [MeteringModule, ChatCompletions, Embeddings, Messages, LegacyCompletions, Responses],
})
export class BillingModule {}
