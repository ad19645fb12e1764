import { DomainError } from '@svc/eventstore';
import { isSealedSecret } from '@svc/platform';
import type { SettingsCommand } from './commands';
import type { SettingsEvent } from './events';
import type { SettingsState } from './state';

/** What a provider key is sealed under (crypto AAD): it opens only for this account and provider. */
export const providerKeyContext = (accountId: string, provider: string) => `provider-key:${accountId}:${provider}`;

/** What may be shown again of a provider key: its last four characters, and only for a key long enough to spare them. */
export function providerKeyHint(apiKey: string): string {
  return apiKey.length >= 16 ? `...${apiKey.slice(-4)}` : '...';
}

type Command<T extends SettingsCommand['type']> = Extract<SettingsCommand, { type: T }>;

export function saveProviderKey(command: Command<'SaveProviderKey'>): SettingsEvent[] {
  // The last line of defence for "never the key in the log": refuse anything not sealed.
  if (!isSealedSecret(command.encryptedKey)) throw new DomainError('provider_key_not_encrypted', 'A provider key is recorded only encrypted.');
  // Always recorded, even for the same hint: the ciphertext says nothing of whether the key changed.
  return [
    { type: 'ProviderKeySaved', data: { account_id: command.accountId, provider: command.provider, encrypted_key: command.encryptedKey, hint: command.hint } },
  ];
}

export function deleteProviderKey(command: Command<'DeleteProviderKey'>, state: SettingsState): SettingsEvent[] {
  // Delete on a missing key is refused rather than ignored: a 404 tells the operator they
  // named the wrong provider, where a silent success would leave the real key in use.
  if (!Object.hasOwn(state.providerKeys, command.provider)) {
    throw new DomainError('provider_key_not_found', `No ${command.provider} key is saved for this account.`);
  }
  return [{ type: 'ProviderKeyDeleted', data: { account_id: command.accountId, provider: command.provider } }];
}
