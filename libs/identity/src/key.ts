import { DomainError, type Decider, type DomainEvent } from '../../eventstore/src/decider';

/** The key aggregate (stream `key-<id>`): lifecycle and restrictions of one API key. */
export const keyStream = (keyId: string) => `key-${keyId}`;

export type KeyScope = 'full' | 'read_only' | 'management';
export type KeyEnvironment = 'live' | 'test';

export type KeyEvent =
  | DomainEvent<
      'KeyCreated',
      {
        key_id: string;
        account_id: string;
        name: string;
        scope: KeyScope;
        environment: KeyEnvironment;
        /** SHA-256 of the secret; the secret itself is never recorded. */
        secret_hash: string;
        /** What a user may see again: prefix and last four characters. */
        secret_hint: string;
      }
    >
  | DomainEvent<'KeyRevoked', { key_id: string; account_id: string }>;

export type KeyCommand =
  | {
      type: 'CreateKey';
      keyId: string;
      accountId: string;
      name: string;
      scope: KeyScope;
      environment: KeyEnvironment;
      secretHash: string;
      secretHint: string;
    }
  | { type: 'RevokeKey' };

export interface KeyState {
  keyId: string | null;
  accountId: string | null;
  revoked: boolean;
}

export const keyDecider: Decider<KeyCommand, KeyState, KeyEvent> = {
  initialState: () => ({ keyId: null, accountId: null, revoked: false }),

  decide(command, state) {
    switch (command.type) {
      case 'CreateKey':
        if (state.keyId !== null) throw new DomainError('key_exists', 'The key already exists.');
        return [
          {
            type: 'KeyCreated',
            data: {
              key_id: command.keyId,
              account_id: command.accountId,
              name: command.name,
              scope: command.scope,
              environment: command.environment,
              secret_hash: command.secretHash,
              secret_hint: command.secretHint,
            },
          },
        ];
      case 'RevokeKey':
        if (state.keyId === null || state.accountId === null) throw new DomainError('key_not_found', 'The key does not exist.');
        if (state.revoked) return [];
        return [{ type: 'KeyRevoked', data: { key_id: state.keyId, account_id: state.accountId } }];
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'KeyCreated':
        return { keyId: event.data.key_id, accountId: event.data.account_id, revoked: false };
      case 'KeyRevoked':
        return { ...state, revoked: true };
      default:
        return state;
    }
  },
};
