import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { fold } from '@svc/eventstore';
import { generateEncryptionKey, sealSecret } from '@svc/platform';
import { settingsDecider } from './decide';
import type { SettingsEvent } from './events';

const spec = deciderSpec(settingsDecider);
const key = Buffer.from(generateEncryptionKey(), 'base64');
const sealed = sealSecret(key, 'sk-caller-0123456789', 'provider-key:a1:openai');
const saved: SettingsEvent = { type: 'ProviderKeySaved', data: { account_id: 'a1', provider: 'openai', encrypted_key: sealed, hint: '...6789' } };
const deleted: SettingsEvent = { type: 'ProviderKeyDeleted', data: { account_id: 'a1', provider: 'openai' } };
const save = { type: 'SaveProviderKey' as const, accountId: 'a1', provider: 'openai', encryptedKey: sealed, hint: '...6789' };
const remove = { type: 'DeleteProviderKey' as const, accountId: 'a1', provider: 'openai' };

describe('settings decider: provider keys (BYOK)', () => {
  it('records a saved key as its ciphertext and hint', () => {
    spec.given([]).when(save).then([saved]);
  });

  it('records a replacement too: a new ciphertext says nothing about whether the key changed', () => {
    spec.given([saved]).when(save).then([saved]);
  });

  it('refuses to record a key that is not sealed', () => {
    spec
      .given([])
      .when({ ...save, encryptedKey: 'sk-caller-0123456789' })
      .thenThrows('provider_key_not_encrypted');
  });

  it('deletes a saved key, and refuses to delete one that is not there', () => {
    spec.given([saved]).when(remove).then([deleted]);
    spec.given([]).when(remove).thenThrows('provider_key_not_found');
    spec.given([saved, deleted]).when(remove).thenThrows('provider_key_not_found');
    spec
      .given([saved])
      .when({ ...remove, provider: 'anthropic' })
      .thenThrows('provider_key_not_found');
  });

  it('keeps one hint per provider in its state', () => {
    const other: SettingsEvent = { type: 'ProviderKeySaved', data: { ...saved.data, provider: 'anthropic', hint: '...abcd' } };
    expect(fold(settingsDecider, [saved, other, deleted]).providerKeys).toEqual({ anthropic: '...abcd' });
  });
});
