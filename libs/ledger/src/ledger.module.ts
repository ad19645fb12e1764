import { Inject, Module } from '@nestjs/common';
import { Command, CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { AggregateStore, Handled } from '../../eventstore/src/aggregate-store';
import type { EventMetadata } from '../../eventstore/src/port';
import { AGGREGATE_STORE } from '../../eventstore/src/tokens';
import { accountDecider, accountStream, type AccountCommand, type AccountEvent, type AccountState } from './account';

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
  constructor(@Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore) {}

  execute({ accountId, command, metadata }: LedgerCommand) {
    return this.aggregates.handle(accountDecider, accountStream(accountId), command, metadata);
  }
}

@Module({ providers: [LedgerCommandHandler] })
export class LedgerModule {}
