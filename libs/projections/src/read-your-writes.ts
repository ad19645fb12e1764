import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Position } from '@svc/eventstore';
import { ProjectionTimeoutError, type ProjectionRunner } from './runner';
import { PROJECTIONS } from './tokens';

/**
 * ARCHITECTURE section 6: a read that must see the caller's own write waits for the
 * projection to reach that write's position. This remembers, per account, the position of
 * the last write this process made for it.
 */
@Injectable()
export class ReadYourWrites {
  private readonly last = new Map<string, Position>();
  private readonly logger = new Logger('read-your-writes');

  constructor(@Inject(PROJECTIONS) private readonly projections: Pick<ProjectionRunner, 'waitFor'>) {}

  wrote(accountId: string, position: Position | undefined): void {
    if (position === undefined) return;
    const known = this.last.get(accountId);
    if (known === undefined || position > known) this.last.set(accountId, position);
  }

  async settle(accountId: string, projection: string): Promise<void> {
    const position = this.last.get(accountId);
    if (position === undefined) return;
    try {
      await this.projections.waitFor(position, [projection]);
    } catch (err) {
      // A projection that lags (worker down) makes the answer stale, not an error.
      if (!(err instanceof ProjectionTimeoutError)) throw err;
      this.logger.warn(`${projection} did not reach ${position} in time; answering from older state`);
    }
  }
}
