import { DomainError, type Decider, type DomainEvent } from '../../eventstore/src/decider';
import type { Nano } from '../../platform/src/money';

/**
 * The account aggregate (stream `account-<id>`): all money. Amounts in events are nano-USD
 * as decimal strings, because JSON has no integers beyond 2^53.
 */
export const accountStream = (accountId: string) => `account-${accountId}`;

export interface GenerationStats {
  model: string;
  provider: string;
  endpoint: string;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
  latency_ms: number;
  /** null for non-streamed responses. */
  ttft_ms: number | null;
}

export type AccountEvent =
  | DomainEvent<'AccountOpened', { account_id: string }>
  | DomainEvent<'CreditsAdded', { account_id: string; amount_nano: string; reason: string }>
  | DomainEvent<
      'HoldPlaced',
      { account_id: string; hold_id: string; key_id: string; amount_nano: string; model: string; endpoint: string; expires_at: string }
    >
  | DomainEvent<'UsageCharged', { account_id: string; hold_id: string; key_id: string; amount_nano: string } & GenerationStats>
  | DomainEvent<
      'HoldReleased',
      { account_id: string; hold_id: string; key_id: string; reason: 'error' | 'zero_completion' } & Partial<GenerationStats> & {
          error_code?: string;
        }
    >;

export type AccountCommand =
  | { type: 'OpenAccount'; accountId: string }
  | { type: 'AddCredits'; amountNano: Nano; reason: string }
  | {
      type: 'PlaceHold';
      holdId: string;
      keyId: string;
      amountNano: Nano;
      model: string;
      endpoint: string;
      /** A hold that is never settled is expired after this long (by the worker). */
      ttlMs: number;
    }
  | { type: 'ChargeUsage'; holdId: string; amountNano: Nano; stats: GenerationStats }
  | { type: 'ReleaseHold'; holdId: string; errorCode: string; stats?: Partial<GenerationStats> };

export interface OpenHold {
  amountNano: Nano;
  keyId: string;
}

export interface AccountState {
  accountId: string | null;
  creditsNano: Nano;
  chargedNano: Nano;
  /** Open holds only: a resolved hold leaves the state, so it cannot be resolved twice. */
  holds: Readonly<Record<string, OpenHold>>;
}

export function heldNano(state: AccountState): Nano {
  let sum = 0n;
  for (const hold of Object.values(state.holds)) sum += hold.amountNano;
  return sum;
}

/** Available = credits - charged - open holds. */
export function availableNano(state: AccountState): Nano {
  return state.creditsNano - state.chargedNano - heldNano(state);
}

function requireOpen(state: AccountState): string {
  if (state.accountId === null) throw new DomainError('account_not_found', 'The account does not exist.');
  return state.accountId;
}

function requireHold(state: AccountState, holdId: string): OpenHold {
  const hold = state.holds[holdId];
  if (!hold) throw new DomainError('hold_not_open', `Hold ${holdId} is not open.`, { hold_id: holdId });
  return hold;
}

export const accountDecider: Decider<AccountCommand, AccountState, AccountEvent> = {
  initialState: () => ({ accountId: null, creditsNano: 0n, chargedNano: 0n, holds: {} }),

  decide(command, state, now) {
    switch (command.type) {
      case 'OpenAccount':
        if (state.accountId !== null) throw new DomainError('account_exists', 'The account already exists.');
        return [{ type: 'AccountOpened', data: { account_id: command.accountId } }];

      case 'AddCredits': {
        const account_id = requireOpen(state);
        if (command.amountNano <= 0n) throw new DomainError('invalid_amount', 'Credits must be a positive amount.');
        return [{ type: 'CreditsAdded', data: { account_id, amount_nano: command.amountNano.toString(), reason: command.reason } }];
      }

      case 'PlaceHold': {
        const account_id = requireOpen(state);
        if (command.amountNano <= 0n) throw new DomainError('invalid_amount', 'A hold must be a positive amount.');
        if (state.holds[command.holdId]) {
          throw new DomainError('hold_exists', `Hold ${command.holdId} already exists.`);
        }
        // Spec 1, rule 1: the balance net of open holds must cover the worst case.
        const available = availableNano(state);
        if (command.amountNano > available) {
          throw new DomainError('insufficient_quota', 'The balance does not cover the worst case of this request.', {
            available_nano: available,
            required_nano: command.amountNano,
          });
        }
        return [
          {
            type: 'HoldPlaced',
            data: {
              account_id,
              hold_id: command.holdId,
              key_id: command.keyId,
              amount_nano: command.amountNano.toString(),
              model: command.model,
              endpoint: command.endpoint,
              expires_at: new Date(now.getTime() + command.ttlMs).toISOString(),
            },
          },
        ];
      }

      case 'ChargeUsage': {
        const account_id = requireOpen(state);
        const hold = requireHold(state, command.holdId);
        if (command.amountNano < 0n) throw new DomainError('invalid_amount', 'A charge cannot be negative.');
        // Spec 1, rule 3: a request that returns no tokens is not billed.
        if (command.stats.completion_tokens === 0 || command.amountNano === 0n) {
          return [
            {
              type: 'HoldReleased',
              data: { account_id, hold_id: command.holdId, key_id: hold.keyId, reason: 'zero_completion', ...command.stats },
            },
          ];
        }
        return [
          {
            type: 'UsageCharged',
            data: {
              account_id,
              hold_id: command.holdId,
              key_id: hold.keyId,
              amount_nano: command.amountNano.toString(),
              ...command.stats,
            },
          },
        ];
      }

      case 'ReleaseHold': {
        const account_id = requireOpen(state);
        const hold = requireHold(state, command.holdId);
        return [
          {
            type: 'HoldReleased',
            data: {
              account_id,
              hold_id: command.holdId,
              key_id: hold.keyId,
              reason: 'error',
              error_code: command.errorCode,
              ...command.stats,
            },
          },
        ];
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'AccountOpened':
        return { ...state, accountId: event.data.account_id };
      case 'CreditsAdded':
        return { ...state, creditsNano: state.creditsNano + BigInt(event.data.amount_nano) };
      case 'HoldPlaced':
        return {
          ...state,
          holds: { ...state.holds, [event.data.hold_id]: { amountNano: BigInt(event.data.amount_nano), keyId: event.data.key_id } },
        };
      case 'UsageCharged':
        return {
          ...closeHold(state, event.data.hold_id),
          chargedNano: state.chargedNano + BigInt(event.data.amount_nano),
        };
      case 'HoldReleased':
        return closeHold(state, event.data.hold_id);
      default:
        return state;
    }
  },
};

function closeHold(state: AccountState, holdId: string): AccountState {
  const { [holdId]: _closed, ...holds } = state.holds;
  return { ...state, holds };
}
