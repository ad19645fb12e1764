import type { Decider } from '@svc/eventstore';
import { setPromptLogging, setStepUp } from './account-settings';
import type { SettingsCommand } from './commands';
import type { SettingsEvent } from './events';
import { deleteProviderKey, saveProviderKey } from './provider-keys';
import { evolveSettings, initialSettingsState, type SettingsState } from './state';
import { deleteWebhook, recordWebhookDelivery, resumeWebhook, rotateWebhookSecret, saveWebhook } from './webhook';

export function decideSettings(command: SettingsCommand, state: SettingsState): SettingsEvent[] {
  switch (command.type) {
    case 'SaveProviderKey':
      return saveProviderKey(command);
    case 'DeleteProviderKey':
      return deleteProviderKey(command, state);
    case 'SetPromptLogging':
      return setPromptLogging(command);
    case 'SetStepUp':
      return setStepUp(command);
    case 'SaveWebhook':
      return saveWebhook(command, state);
    case 'RotateWebhookSecret':
      return rotateWebhookSecret(command, state);
    case 'DeleteWebhook':
      return deleteWebhook(command, state);
    case 'ResumeWebhook':
      return resumeWebhook(command, state);
    case 'RecordWebhookDelivery':
      return recordWebhookDelivery(command, state);
  }
}

export const settingsDecider: Decider<SettingsCommand, SettingsState, SettingsEvent> = {
  initialState: initialSettingsState,
  decide: decideSettings,
  evolve: evolveSettings,
};
