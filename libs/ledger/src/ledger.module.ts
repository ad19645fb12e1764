import { Inject, Logger, Module } from '@nestjs/common';
import { Command, CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { AggregateStore, EventMetadata, Handled } from '@svc/eventstore';
import { AGGREGATE_STORE, DomainError } from '@svc/eventstore';
import { accountDecider, accountStream, isLimitRefusal, type AccountCommand, type AccountEvent, type AccountState, type PlaceHold } from './account';

/** A command for the account aggregate, through the command bus. */
export class LedgerCommand extends Command<Handled<AccountState, AccountEvent>> {
  constructor(
    readonly accountId: string,
    readonly command: AccountCommand,
    readonly metadata: EventMetadata = {},
  ) {
    super();
  }
}

@CommandHandler(LedgerCommand)
export class LedgerCommandHandler implements ICommandHandler<LedgerCommand> {
  private readonly logger = new Logger('ledger');

  constructor(@Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore) {}

  execute({ accountId, command, metadata }: LedgerCommand) {
    return decideOnAccount(this.aggregates, accountId, command, metadata, (message) => this.logger.warn(message));
  }
}

/**
 * `command` decided on the account's stream: what LedgerCommand does, and what a gateway does
 * for a command a peer hands it (issue 45).
 */
export async function decideOnAccount(
  aggregates: AggregateStore,
  accountId: string,
  command: AccountCommand,
  metadata: EventMetadata,
  warn: (message: string) => void,
): Promise<Handled<AccountState, AccountEvent>> {
  const stream = accountStream(accountId);
  try {
    return await aggregates.handle(accountDecider, stream, command, metadata);
  } catch (err) {
    if (command.type === 'PlaceHold' && err instanceof DomainError && isLimitRefusal(err.code)) {
      await recordRefusal(aggregates, stream, command, metadata, warn);
    }
    throw err;
  }
}

/**
 * A refusal throws, so it cannot carry its KeySpendCapReached / DailyLimitReached event: a
 * second decision records it (once per window; later refusals decide nothing and append
 * nothing). Best effort: the caller gets its 429 either way, and the next refusal retries.
 */
async function recordRefusal(
  aggregates: AggregateStore,
  stream: string,
  hold: PlaceHold,
  metadata: EventMetadata,
  warn: (message: string) => void,
): Promise<void> {
  try {
    await aggregates.handle(accountDecider, stream, { type: 'RecordLimitRefusal', hold }, metadata);
  } catch (err) {
    warn(`could not record a spend limit refusal on ${stream}: ${(err as Error).message}`);
  }
}

@Module({ providers: [LedgerCommandHandler] })
export class LedgerModule {}
