/**
 * Email step-up (spec 1, 8): when an account turns it on, sensitive actions need a 6-digit code
 * sent by email, valid 15 minutes, for that action only, used once, void after 5 wrong tries.
 * The stream `step-up-<account>` records codes by their salted hash, never the code itself;
 * a code presented comes in the command (commands are not recorded) and is compared here.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { DomainError, type Decider, type DomainEvent } from '@svc/eventstore';

export const stepUpStream = (accountId: string) => `step-up-${accountId}`;

/**
 * The actions that need a code (spec 1), and changing the step-up setting itself while it is
 * on: otherwise whoever holds a management key could turn the protection off first.
 */
export const STEP_UP_ACTIONS = ['create_key', 'rotate_key', 'grant_management', 'save_webhook', 'save_provider_key', 'delete_organization', 'change_step_up'] as const;
export type StepUpAction = (typeof STEP_UP_ACTIONS)[number];

export const STEP_UP_CODE_TTL_MS = 15 * 60_000;
export const STEP_UP_MAX_WRONG_TRIES = 5;
export const STEP_UP_CODE = /^\d{6}$/;

export const isStepUpAction = (v: unknown): v is StepUpAction => typeof v === 'string' && (STEP_UP_ACTIONS as readonly string[]).includes(v);

/** SHA-256 of the salt and the code: a salt per code, so equal codes do not look equal at rest. */
export function stepUpCodeHash(salt: string, code: string): string {
  return createHash('sha256').update(`${salt}:${code}`).digest('hex');
}

export type StepUpEvent =
  | DomainEvent<'StepUpCodeIssued', { account_id: string; code_id: string; action: StepUpAction; salt: string; code_hash: string; expires_at: string }>
  | DomainEvent<'StepUpCodeUsed', { account_id: string; code_id: string; action: StepUpAction }>
  | DomainEvent<'StepUpCodeRejected', { account_id: string; code_id: string; action: StepUpAction; wrong_tries: number }>;

export type StepUpCommand =
  /** `codeId`, `salt` and `codeHash` are made at the edge, which also mails the code: the decider stays pure. */
  | { type: 'IssueStepUpCode'; accountId: string; action: StepUpAction; codeId: string; salt: string; codeHash: string }
  | { type: 'UseStepUpCode'; accountId: string; action: StepUpAction; code: string };

interface ActiveCode {
  codeId: string;
  salt: string;
  codeHash: string;
  expiresAt: string;
  wrongTries: number;
}

export interface StepUpState {
  /** The latest unused code of each action: a new one replaces it. */
  codes: Readonly<Partial<Record<StepUpAction, ActiveCode>>>;
}

function issue(command: Extract<StepUpCommand, { type: 'IssueStepUpCode' }>, now: Date): StepUpEvent[] {
  const expires_at = new Date(now.getTime() + STEP_UP_CODE_TTL_MS).toISOString();
  const { accountId: account_id, codeId: code_id, action, salt, codeHash: code_hash } = command;
  return [{ type: 'StepUpCodeIssued', data: { account_id, code_id, action, salt, code_hash, expires_at } }];
}

/**
 * A right code is used up; a wrong one counts a try (recorded, so the count holds across
 * processes). No code, an expired one and one out of tries are refused without an event.
 */
function use(command: Extract<StepUpCommand, { type: 'UseStepUpCode' }>, state: StepUpState, now: Date): StepUpEvent[] {
  const active = state.codes[command.action];
  if (!active) throw new DomainError('step_up_invalid', 'No confirmation code was sent for this action, or it was used; ask for a new one.');
  if (now.getTime() >= Date.parse(active.expiresAt)) throw new DomainError('step_up_expired', 'The confirmation code has expired; ask for a new one.');
  if (active.wrongTries >= STEP_UP_MAX_WRONG_TRIES) throw new DomainError('step_up_invalid', 'The confirmation code was entered wrong too many times; ask for a new one.');
  const ids = { account_id: command.accountId, code_id: active.codeId, action: command.action };
  const presented = Buffer.from(stepUpCodeHash(active.salt, command.code), 'hex');
  if (timingSafeEqual(presented, Buffer.from(active.codeHash, 'hex'))) return [{ type: 'StepUpCodeUsed', data: ids }];
  return [{ type: 'StepUpCodeRejected', data: { ...ids, wrong_tries: active.wrongTries + 1 } }];
}

export const stepUpDecider: Decider<StepUpCommand, StepUpState, StepUpEvent> = {
  initialState: () => ({ codes: {} }),
  decide(command, state, now) {
    switch (command.type) {
      case 'IssueStepUpCode':
        return issue(command, now);
      case 'UseStepUpCode':
        return use(command, state, now);
    }
  },
  evolve(state, event) {
    const d = event.data;
    switch (event.type) {
      case 'StepUpCodeIssued':
        return { codes: { ...state.codes, [d.action]: { codeId: d.code_id, salt: event.data.salt, codeHash: event.data.code_hash, expiresAt: event.data.expires_at, wrongTries: 0 } } };
      case 'StepUpCodeUsed': {
        const { [d.action]: _used, ...rest } = state.codes;
        return { codes: rest };
      }
      case 'StepUpCodeRejected': {
        const active = state.codes[d.action];
        return active && active.codeId === d.code_id ? { codes: { ...state.codes, [d.action]: { ...active, wrongTries: event.data.wrong_tries } } } : state;
      }
    }
  },
};
