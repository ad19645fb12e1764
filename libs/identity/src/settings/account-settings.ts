import { DomainError } from '@svc/eventstore';
import type { SettingsCommand } from './commands';
import { PROMPT_LOG_RETENTION_DAYS, type SettingsEvent } from './events';

type Command<T extends SettingsCommand['type']> = Extract<SettingsCommand, { type: T }>;

/** Every write is recorded, a repeated one too: the audit log shows who saved settings, and when. */
export function setPromptLogging(command: Command<'SetPromptLogging'>): SettingsEvent[] {
  const days = command.retentionDays;
  if (!Number.isInteger(days) || days < PROMPT_LOG_RETENTION_DAYS.min || days > PROMPT_LOG_RETENTION_DAYS.max) {
    throw new DomainError(
      'invalid_retention_days',
      `retention_days must be an integer from ${PROMPT_LOG_RETENTION_DAYS.min} to ${PROMPT_LOG_RETENTION_DAYS.max}.`,
    );
  }
  return [{ type: 'PromptLoggingSet', data: { account_id: command.accountId, enabled: command.enabled, retention_days: days } }];
}

/** Codes go by email: step-up cannot be on without an address to send them to. */
export function setStepUp(command: Command<'SetStepUp'>): SettingsEvent[] {
  if (command.enabled && !command.email) throw new DomainError('step_up_email_required', 'Email step-up needs an email address to send codes to.');
  return [{ type: 'StepUpSet', data: { account_id: command.accountId, enabled: command.enabled, email: command.email } }];
}
