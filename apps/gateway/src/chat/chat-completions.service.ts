import { Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { ChatCompletions } from '@svc/billing';

/** The process's wait for running streams at shutdown. */
@Injectable()
export class ChatCompletionsService implements BeforeApplicationShutdown {
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
