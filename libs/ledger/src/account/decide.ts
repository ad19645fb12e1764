import { DomainError } from '@svc/eventstore';
import { MAX_AMOUNT_NANO, nanoToUsdString } from '@svc/platform';
import { EXPIRE_BATCH, type AccountCommand } from './commands';
import { freeGenerationData, meterDifference, tokenUsage, type AccountEvent } from './events';
import {
  balanceLow,
  DAILY_LIMIT_CODE,
  dailyLimitReached,
  holdRefusal,
  KEY_CAP_CODES,
  keyCapReachedByRefusal,
  keyWindowData,
  thresholdsCrossedBy,
} from './limits';
import { iso } from './thresholds';
import { BUDGET_LIMIT_CODE, budgetData, budgetReachedByRefusal, budgetThresholdsCrossedBy } from './budgets';
import { accountDayChargedNano, adjustmentFingerprint, availableNano, IDEMPOTENCY_KEEP_MS, type AccountState, type OpenHold, type ReapedHold } from './state';
import { billedAmount } from '../pricing';

type Command<T extends AccountCommand['type']> = Extract<AccountCommand, { type: T }>;

/** Emmett's shape: one function per command, and a thin exhaustive dispatch. */
export function decide(command: AccountCommand, state: AccountState, now: Date): AccountEvent[] {
  switch (command.type) {
    case 'OpenAccount':
      return openAccount(command, state, now);
    case 'AddCredits':
      return addCredits(command, state, now);
    case 'PlaceHold':
      return placeHold(command, state, now);
    case 'ChargeUsage':
      return chargeUsage(command, state, now);
    case 'ReleaseHold':
      return releaseHold(command, state, now);
    case 'ExpireHolds':
      return expireHolds(command, state, now);
    case 'SetDailyLimit':
      return setDailyLimit(command, state, now);
    case 'RecordLimitRefusal':
      return recordLimitRefusal(command, state, now);
    case 'RecordFreeGeneration':
      return recordFreeGeneration(command, state, now);
    case 'AdjustBalance':
      return adjustBalance(command, state, now);
  }
}

function requireOpen(state: AccountState): string {
  if (state.accountId === null) throw new DomainError('account_not_found', 'The account does not exist.');
  return state.accountId;
}

function requireHold(state: AccountState, holdId: string): OpenHold {
  const hold = state.holds.get(holdId);
  if (!hold) throw new DomainError('hold_not_open', `Hold ${holdId} is not open.`, { hold_id: holdId });
  return hold;
}

/** Opens the account, once. */
function openAccount(command: Command<'OpenAccount'>, state: AccountState, now: Date): AccountEvent[] {
  if (state.accountId !== null) throw new DomainError('account_exists', 'The account already exists.');
  return [{ type: 'AccountOpened', data: { account_id: command.accountId } }];
}

/** Credits the account: a positive amount that keeps the total within what the read model can sum. */
function addCredits(command: Command<'AddCredits'>, state: AccountState, now: Date): AccountEvent[] {
  const account_id = requireOpen(state);
  if (command.amountNano <= 0n) throw new DomainError('invalid_amount', 'Credits must be a positive amount.');
  // The credits read model sums them in a PostgreSQL bigint: past the bound it could not.
  if (state.creditsNano + command.amountNano > MAX_AMOUNT_NANO) {
    throw new DomainError('credits_limit_exceeded', `An account holds at most ${nanoToUsdString(MAX_AMOUNT_NANO)} USD of credits.`, { param: 'amount_usd' });
  }
  return [{ type: 'CreditsAdded', data: { account_id, amount_nano: command.amountNano.toString(), reason: command.reason } }];
}

/** Spec 1 rule 1: holds the worst case, unless a key cap, the daily limit or the balance refuses it. */
function placeHold(command: Command<'PlaceHold'>, state: AccountState, now: Date): AccountEvent[] {
  const account_id = requireOpen(state);
  if (command.amountNano <= 0n) throw new DomainError('invalid_amount', 'A hold must be a positive amount.');
  if (state.holds.has(command.holdId)) {
    throw new DomainError('hold_exists', `Hold ${command.holdId} already exists.`);
  }
  refuseRepeatedRequest(command, state, now);
  const refusal = holdRefusal(state, command, now);
  if (refusal) throw refusal;
  const limit = command.keyLimit ?? null;
  const { idempotency, budgets, guardrailFindings } = command;
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
        expires_at: iso(now.getTime() + command.ttlMs),
        key_limit: limit && { limit_nano: limit.limitNano.toString(), reset: limit.reset },
        ...(idempotency ? { idempotency: { ...idempotency, until: iso(now.getTime() + IDEMPOTENCY_KEEP_MS) } } : {}),
        ...(budgets?.length ? { budgets: budgets.map(budgetData) } : {}),
        ...(guardrailFindings?.length ? { guardrail_findings: guardrailFindings.map((f) => ({ ...f })) } : {}),
      },
    },
  ];
}

/**
 * Spec 3.3 and 8, issue 41 B: a request whose Idempotency-Key was used within 24 hours is not
 * held again, whatever the edge's own store remembers (it may have lost the key): while the
 * first runs it is in progress; once charged, running it again would bill it twice; sent with
 * another body, the key is reused. A request whose hold was released may run again.
 */
function refuseRepeatedRequest(command: Command<'PlaceHold'>, state: AccountState, now: Date): void {
  if (!command.idempotency) return;
  const earlier = state.idempotency.get(command.idempotency.key);
  if (!earlier || earlier.untilMs <= now.getTime()) return;
  const details = { param: 'Idempotency-Key', generation_id: earlier.holdId };
  if (earlier.fingerprint !== command.idempotency.fingerprint) {
    throw new DomainError(
      'idempotency_key_reused',
      'This Idempotency-Key was used with a different request (endpoint or body); use a new key for a new request.',
      details,
    );
  }
  if (!earlier.charged)
    throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still running; retry once it has finished.', details);
  throw new DomainError(
    'idempotency_completed',
    `A request with this Idempotency-Key already completed and was billed as generation ${earlier.holdId}; it was not run again. Its response could not be kept for replay: look it up with GET /v1/generation?id=${earlier.holdId}.`,
    details,
  );
}

/** Settles a hold at its actual cost; spec 1 rule 3: nothing returned, nothing charged. */
function chargeUsage(command: Command<'ChargeUsage'>, state: AccountState, now: Date): AccountEvent[] {
  const account_id = requireOpen(state);
  const reaped = command.reaped ? undefined : state.reaped.get(command.holdId);
  if (reaped && !state.holds.has(command.holdId) && reaped.untilMs > now.getTime()) return correctReapedCharge(command, state, account_id, reaped, now);
  const hold = requireHold(state, command.holdId);
  if (command.amountNano < 0n) throw new DomainError('invalid_amount', 'A charge cannot be negative.');
  // Spec 1, rule 3: a request that returns no tokens is not billed.
  if (billedAmount(command.amountNano, command.returned ?? command.stats.completion_tokens) === 0n) {
    return [
      {
        type: 'HoldReleased',
        data: { account_id, hold_id: command.holdId, key_id: hold.keyId, reason: 'zero_completion', ...command.stats },
      },
    ];
  }
  // More than the hold happens when the provider counts more input than we estimated: the
  // work is done, so it is charged in full and the excess recorded for the auditor.
  const exceeded = command.amountNano > hold.amountNano ? command.amountNano - hold.amountNano : 0n;
  const usage = command.usage ?? tokenUsage(command.stats);
  return [
    {
      type: 'UsageCharged',
      data: {
        account_id,
        hold_id: command.holdId,
        key_id: hold.keyId,
        amount_nano: command.amountNano.toString(),
        charged_at: now.toISOString(),
        exceeded_hold_nano: exceeded.toString(),
        ...command.stats,
        usage,
        ...(command.lines === undefined ? {} : { lines: command.lines }),
        ...(command.providerCostNano == null ? {} : { provider_cost_nano: command.providerCostNano.toString() }),
        ...(command.reaped ? { reaped: true as const } : {}),
      },
    },
    ...thresholdsCrossedBy(state, account_id, hold.keyId, command.amountNano, now),
    ...budgetThresholdsCrossedBy(state, account_id, hold.budgets ?? [], command.amountNano, now),
  ];
}

/**
 * Issue 41 D: the hold reaper settled this hold from what its process had recorded, taking the
 * process for dead (its lease lapsed: a pause, a lost database). The process lived, delivered
 * its output and now charges it: what it charges beyond the reaper's charge is charged, once,
 * even past the balance, since the output was delivered; nothing more was delivered, nothing more
 * is charged.
 */
function correctReapedCharge(command: Command<'ChargeUsage'>, state: AccountState, account_id: string, reaped: ReapedHold, now: Date): AccountEvent[] {
  if (command.amountNano < 0n) throw new DomainError('invalid_amount', 'A charge cannot be negative.');
  const total = billedAmount(command.amountNano, command.returned ?? command.stats.completion_tokens);
  if (total <= reaped.chargedNano) return [];
  const delta = total - reaped.chargedNano;
  const usage = command.usage ?? tokenUsage(command.stats);
  return [
    {
      type: 'UsageCorrected',
      data: {
        account_id,
        hold_id: command.holdId,
        key_id: reaped.keyId,
        amount_nano: delta.toString(),
        total_nano: total.toString(),
        charged_at: now.toISOString(),
        ...command.stats,
        usage,
        usage_added: meterDifference(usage, reaped.usage),
        ...(command.lines === undefined ? {} : { lines: command.lines }),
        ...(command.providerCostNano == null ? {} : { provider_cost_nano: command.providerCostNano.toString() }),
      },
    },
    ...thresholdsCrossedBy(state, account_id, reaped.keyId, delta, now),
    ...budgetThresholdsCrossedBy(state, account_id, reaped.budgets ?? [], delta, now),
  ];
}

/** Releases a hold whose request failed: nothing is charged. */
function releaseHold(command: Command<'ReleaseHold'>, state: AccountState, now: Date): AccountEvent[] {
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
        ...(command.reaped ? { reaped: true as const } : {}),
      },
    },
  ];
}

/** Expires the holds past their deadline, oldest first, at most `max`. */
function expireHolds(command: Command<'ExpireHolds'>, state: AccountState, now: Date): AccountEvent[] {
  const account_id = requireOpen(state);
  return (
    [...state.holds.entries()]
      .filter(([, hold]) => hold.expiresAtMs <= now.getTime())
      // Oldest deadline first, so a capped batch makes progress in a stable order.
      .sort(([a, x], [b, y]) => x.expiresAtMs - y.expiresAtMs || (a < b ? -1 : 1))
      .slice(0, command.max ?? EXPIRE_BATCH)
      .map(([hold_id, hold]) => ({
        type: 'HoldExpired' as const,
        data: { account_id, hold_id, key_id: hold.keyId, amount_nano: hold.amountNano.toString(), expires_at: iso(hold.expiresAtMs) },
      }))
  );
}

/** Sets or removes the account's daily spend limit. */
function setDailyLimit(command: Command<'SetDailyLimit'>, state: AccountState, now: Date): AccountEvent[] {
  const account_id = requireOpen(state);
  if (command.limitNano !== null && command.limitNano < 0n) throw new DomainError('invalid_amount', 'A daily limit cannot be negative.');
  if (command.limitNano !== null && command.limitNano > MAX_AMOUNT_NANO) {
    throw new DomainError('invalid_amount', `A daily limit is at most ${nanoToUsdString(MAX_AMOUNT_NANO)} USD.`, { param: 'daily_limit_usd' });
  }
  if (command.limitNano === state.dailyLimitNano) return [];
  return [{ type: 'DailyLimitSet', data: { account_id, limit_nano: command.limitNano?.toString() ?? null } }];
}

/** Records the "reached" event a refused hold could not carry, once per window. */
function recordLimitRefusal(command: Command<'RecordLimitRefusal'>, state: AccountState, now: Date): AccountEvent[] {
  const account_id = requireOpen(state);
  const { hold } = command;
  const refusal = holdRefusal(state, hold, now);
  if (refusal?.code === DAILY_LIMIT_CODE && state.dailyLimitNano !== null) {
    return dailyLimitReached(state, account_id, state.dailyLimitNano, accountDayChargedNano(state, now.getTime()), now, 'refusal');
  }
  if (hold.keyLimit && refusal?.code === KEY_CAP_CODES[hold.keyLimit.reset]) {
    return keyCapReachedByRefusal(state, keyWindowData(state, account_id, hold.keyId, hold.keyLimit, now));
  }
  if (refusal?.code === BUDGET_LIMIT_CODE) return budgetReachedByRefusal(state, account_id, hold, refusal, now);
  return [];
}

/** Records a generation that moves no money (a free call, a cache hit). */
function recordFreeGeneration(command: Command<'RecordFreeGeneration'>, state: AccountState, now: Date): AccountEvent[] {
  return [{ type: 'FreeGenerationRecorded', data: freeGenerationData(requireOpen(state), command) }];
}

/**
 * Issue 23, corrections: a credit note gives money back (positive); an adjustment moves the
 * balance either way, but never takes the available balance (open holds counted) below zero, as
 * no hold may: a request admitted against it must still be payable.
 */
function adjustBalance(command: Command<'AdjustBalance'>, state: AccountState, now: Date): AccountEvent[] {
  const account_id = requireOpen(state);
  const { adjustmentId: adjustment_id, amountNano, kind, reason, operator } = command;
  const data = { account_id, adjustment_id, amount_nano: amountNano.toString(), kind, reason, operator };
  const recorded = state.adjustments[adjustment_id];
  if (recorded !== undefined) {
    if (recorded === adjustmentFingerprint(data)) return [];
    throw new DomainError('adjustment_id_conflict', `Adjustment ${adjustment_id} was already recorded with other content.`, { param: 'adjustment_id' });
  }
  if (amountNano === 0n) throw new DomainError('invalid_amount', 'An adjustment cannot be zero.', { param: 'amount_usd' });
  if (kind === 'credit_note' && amountNano < 0n)
    throw new DomainError('invalid_amount', 'A credit note gives money back: its amount must be positive.', { param: 'amount_usd' });
  if (amountNano > 0n && state.creditsNano + state.adjustedNano + amountNano > MAX_AMOUNT_NANO) {
    // The read model sums adjustments in a PostgreSQL bigint, as it does credits.
    throw new DomainError('credits_limit_exceeded', `An account holds at most ${nanoToUsdString(MAX_AMOUNT_NANO)} USD of credits and adjustments.`, {
      param: 'amount_usd',
    });
  }
  const available = availableNano(state);
  if (amountNano < 0n && available + amountNano < 0n) {
    throw new DomainError(
      'adjustment_exceeds_balance',
      `The adjustment of ${nanoToUsdString(amountNano)} USD exceeds the available balance of ${nanoToUsdString(available)} USD.`,
      {
        param: 'amount_usd',
        available_nano: available,
      },
    );
  }
  return [{ type: 'BalanceAdjusted', data }, ...(amountNano < 0n ? balanceLow(state, account_id, -amountNano) : [])];
}
