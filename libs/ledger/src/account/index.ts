/**
 * The account aggregate (stream `account-<id>`): all money, as an Emmett decider. Its events
 * (./events), commands (./commands), state and evolve (./state), the limits every hold and charge
 * is checked against (./limits), and one function per command (./decide).
 */
import type { Decider } from '@svc/eventstore';
import type { AccountCommand } from './commands';
import { decide } from './decide';
import type { AccountEvent } from './events';
import { accountSnapshot } from './snapshot';
import { evolve, initialState, type AccountState } from './state';

export * from './commands';
export * from './events';
export * from './upcast';
export { BUDGET_LIMIT_CODE, budgetHeldNano, budgetSpendOf } from './budgets';
export { BALANCE_LOW_NANO, DAILY_LIMIT_CODE, isLimitRefusal, KEY_CAP_CODES } from './limits';
export { availableNano, balanceNano, chargedIn, heldNano, keySpendNano, type AccountState, type KeySpend, type OpenHold } from './state';

export { ACCOUNT_SNAPSHOT_VERSION, accountSnapshot } from './snapshot';

export const accountDecider: Decider<AccountCommand, AccountState, AccountEvent> = { initialState, decide, evolve, snapshot: accountSnapshot };
