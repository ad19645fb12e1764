import { DomainError, type Decider, type DomainEvent } from '@svc/eventstore';
import { isSealedSecret } from '@svc/platform';

/**
 * The settings aggregate (stream `settings-<account>`, ARCHITECTURE section 4): per-account
 * settings that are neither money nor key lifecycle. For now the provider keys of BYOK; the
 * webhook, prompt logging and step-up settings join it later.
 *
 * It lives in identity, not in the ledger: the ledger is the money boundary (`account-<id>`),
 * and a provider key decides nothing about money; the chat path only reads it.
 */
export const settingsStream = (accountId: string) => `settings-${accountId}`;

/** What a provider key is sealed under (crypto AAD): it opens only for this account and provider. */
export const providerKeyContext = (accountId: string, provider: string) => `provider-key:${accountId}:${provider}`;

/** What may be shown again of a provider key: its last four characters, and only for a key long enough to spare them. */
export function providerKeyHint(apiKey: string): string {
  return apiKey.length >= 16 ? `...${apiKey.slice(-4)}` : '...';
}

/**
 * `encrypted_key` is the provider key sealed with SVC_ENCRYPTION_KEY (libs/platform/src/crypto),
 * never the key. An encrypted secret in an append-only log is acceptable because the log holds
 * nothing usable without the encryption key, which lives outside the log (environment, or the
 * data dir in dev), and because the remedy for a leaked provider key is revoking it at the
 * provider, which no storage choice replaces. Purging it from the log means crypto-shredding:
 * rotating SVC_ENCRYPTION_KEY (after re-saving the keys still in use) leaves every older
 * ciphertext unreadable. ARCHITECTURE section 4 puts "provider keys (encrypted)" in this stream
 * for that reason; content, which must be purgeable one record at a time, stays out of events.
 */
export type SettingsEvent =
  | DomainEvent<'ProviderKeySaved', { account_id: string; provider: string; encrypted_key: string; hint: string }>
  | DomainEvent<'ProviderKeyDeleted', { account_id: string; provider: string }>;

/** `provider` is a provider name of the catalog, checked at the edge (the catalog is not domain state). */
export type SettingsCommand =
  | { type: 'SaveProviderKey'; accountId: string; provider: string; encryptedKey: string; hint: string }
  | { type: 'DeleteProviderKey'; accountId: string; provider: string };

export interface SettingsState {
  /** Hints of the saved provider keys, by provider name. */
  providerKeys: Readonly<Record<string, string>>;
}

export const settingsDecider: Decider<SettingsCommand, SettingsState, SettingsEvent> = {
  initialState: () => ({ providerKeys: {} }),

  decide(command, state) {
    switch (command.type) {
      case 'SaveProviderKey':
        // The last line of defence for "never the key in the log": refuse anything not sealed.
        if (!isSealedSecret(command.encryptedKey)) throw new DomainError('provider_key_not_encrypted', 'A provider key is recorded only encrypted.');
        // Always recorded, even for the same hint: the ciphertext says nothing of whether the key changed.
        return [{ type: 'ProviderKeySaved', data: { account_id: command.accountId, provider: command.provider, encrypted_key: command.encryptedKey, hint: command.hint } }];
      case 'DeleteProviderKey':
        // Delete on a missing key is refused rather than ignored: a 404 tells the operator they
        // named the wrong provider, where a silent success would leave the real key in use.
        if (!Object.hasOwn(state.providerKeys, command.provider)) {
          throw new DomainError('provider_key_not_found', `No ${command.provider} key is saved for this account.`);
        }
        return [{ type: 'ProviderKeyDeleted', data: { account_id: command.accountId, provider: command.provider } }];
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'ProviderKeySaved':
        return { providerKeys: { ...state.providerKeys, [event.data.provider]: event.data.hint } };
      case 'ProviderKeyDeleted': {
        const { [event.data.provider]: _deleted, ...rest } = state.providerKeys;
        return { providerKeys: rest };
      }
      default:
        // Other settings events of the stream (webhook, ...) leave the provider keys alone.
        return state;
    }
  },
};
