import { Inject, Module } from '@nestjs/common';
import { Command, CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { AggregateStore, EventMetadata, Handled } from '@svc/eventstore';
import { AGGREGATE_STORE } from '@svc/eventstore';
import { keyDecider, keyStream, type KeyCommand, type KeyEvent, type KeyState } from './key';
import { orgDecider, orgStream, type OrgCommand, type OrgEvent, type OrgState } from './organization';
import { settingsDecider, settingsStream, type SettingsCommand, type SettingsEvent, type SettingsState } from './settings/index';

/** A command for the key aggregate, through the command bus. */
export class IdentityCommand extends Command<Handled<KeyState, KeyEvent>> {
  constructor(
    readonly keyId: string,
    readonly command: KeyCommand,
    readonly metadata: EventMetadata = {},
  ) {
    super();
  }
}

/** A command for the organization aggregate, through the command bus. */
export class OrganizationCommand extends Command<Handled<OrgState, OrgEvent>> {
  constructor(
    readonly orgId: string,
    readonly command: OrgCommand,
    readonly metadata: EventMetadata = {},
  ) {
    super();
  }
}

/** A command for an account's settings (stream `settings-<account>`), through the command bus. */
export class SettingsCommandMessage extends Command<Handled<SettingsState, SettingsEvent>> {
  constructor(
    readonly accountId: string,
    readonly command: SettingsCommand,
    readonly metadata: EventMetadata = {},
  ) {
    super();
  }
}

@CommandHandler(IdentityCommand)
export class IdentityCommandHandler implements ICommandHandler<IdentityCommand> {
  constructor(@Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore) {}

  execute({ keyId, command, metadata }: IdentityCommand) {
    return this.aggregates.handle(keyDecider, keyStream(keyId), command, metadata);
  }
}

@CommandHandler(OrganizationCommand)
export class OrganizationCommandHandler implements ICommandHandler<OrganizationCommand> {
  constructor(@Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore) {}

  execute({ orgId, command, metadata }: OrganizationCommand) {
    return this.aggregates.handle(orgDecider, orgStream(orgId), command, metadata);
  }
}

@CommandHandler(SettingsCommandMessage)
export class SettingsCommandHandler implements ICommandHandler<SettingsCommandMessage> {
  constructor(@Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore) {}

  execute({ accountId, command, metadata }: SettingsCommandMessage) {
    return this.aggregates.handle(settingsDecider, settingsStream(accountId), command, metadata);
  }
}

@Module({ providers: [IdentityCommandHandler, OrganizationCommandHandler, SettingsCommandHandler] })
export class IdentityModule {}
