/**
 * Email step-up (spec 1, 8): when an account turns it on, sensitive actions need a 6-digit code
 * sent by email, valid 15 minutes, for that action only, used once, void after 5 wrong tries.
 * The stream `step-up-<account>` records codes by their salted HMAC under a server secret, never
 * the code itself; a code presented comes in the command (commands are not recorded) and is
 * compared here. A bare hash of a 6-digit code is reversed by trying the million codes, so a
 * reader of the event store must not be able to (issue 41 S2).
 */
import { createHash, createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { DomainError, type Decider, type DomainEvent } from '@svc/eventstore';

export const stepUpStream = (accountId: string) => `step-up-${accountId}`;

/**
 * The actions that need a code (spec 1), and changing the step-up setting itself while it is
 * on: otherwise whoever holds a management key could turn the protection off first.
 */
export const STEP_UP_ACTIONS = [
  'create_key',
  'rotate_key',
  'grant_management',
  'save_webhook',
  'save_provider_key',
  'delete_organization',
  'change_step_up',
] as const;
export type StepUpAction = (typeof STEP_UP_ACTIONS)[number];

export const STEP_UP_CODE_TTL_MS = 15 * 60_000;
export const STEP_UP_MAX_WRONG_TRIES = 5;
export const STEP_UP_CODE = /^\d{6}$/;

export const isStepUpAction = (v: unknown): v is StepUpAction => typeof v === 'string' && (STEP_UP_ACTIONS as readonly string[]).includes(v);

/**
 * Issue 41 S2: code requests per account, recorded in the account's stream so the limit holds
 * across processes and restarts: at most this many codes in any STEP_UP_ISSUE_WINDOW_MS.
 */
export const STEP_UP_CODES_PER_WINDOW = 5;
export const STEP_UP_ISSUE_WINDOW_MS = 10 * 60_000;

/** How codes issued since issue 41 are stored: HMAC-SHA256 keyed by STEP_UP_CODE_KEY's derivation. */
export const STEP_UP_CODE_SCHEME = 'hmac-sha256';

/** The key codes are HMACed with, derived from SVC_ENCRYPTION_KEY for this use only. */
export function stepUpCodeKey(encryptionKey: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', encryptionKey, Buffer.alloc(0), 'svc-gateway step-up codes', 32));
}

/** HMAC-SHA256 of the salt and the code: without the server's key, the stored value tells nothing. */
export function stepUpCodeHmac(key: Buffer, salt: string, code: string): string {
  return createHmac('sha256', key).update(`${salt}:${code}`).digest('hex');
}

/**
 * SHA-256 of the salt and the code: how codes issued before issue 41 were stored. Still checked
 * for those (each lives 15 minutes at most, so none is left soon after the upgrade); never written.
 */
export function stepUpCodeHash(salt: string, code: string): string {
  return createHash('sha256').update(`${salt}:${code}`).digest('hex');
}

export type StepUpEvent =
  | DomainEvent<
      'StepUpCodeIssued',
      { account_id: string; code_id: string; action: StepUpAction; salt: string; code_hash: string; expires_at: string; scheme?: typeof STEP_UP_CODE_SCHEME }
    >
  | DomainEvent<'StepUpCodeUsed', { account_id: string; code_id: string; action: StepUpAction }>
  | DomainEvent<'StepUpCodeRejected', { account_id: string; code_id: string; action: StepUpAction; wrong_tries: number }>;

export type StepUpCommand =
  /** `codeId`, `salt` and `codeHash` (stepUpCodeHmac) are made at the edge, which also mails the code: the decider stays pure. */
  | { type: 'IssueStepUpCode'; accountId: string; action: StepUpAction; codeId: string; salt: string; codeHash: string }
  /** `codeKey`: stepUpCodeKey of the server's key; null without one (then only a code of the old scheme can match). */
  | { type: 'UseStepUpCode'; accountId: string; action: StepUpAction; code: string; codeKey: Buffer | null };

interface ActiveCode {
  codeId: string;
  salt: string;
  codeHash: string;
  /** Undefined: issued before issue 41, a bare salted SHA-256. */
  scheme?: typeof STEP_UP_CODE_SCHEME;
  expiresAt: string;
  wrongTries: number;
}

export interface StepUpState {
  /** The latest unused code of each action: a new one replaces it. */
  codes: Readonly<Partial<Record<StepUpAction, ActiveCode>>>;
  /** When the latest codes were issued (ISO), at most STEP_UP_CODES_PER_WINDOW, oldest first. */
  issuedAt?: readonly string[];
}

/** Until the next code may be issued (ms), or 0 when one may be now. */
export function stepUpRetryAfterMs(state: StepUpState, now: Date): number {
  const recent = (state.issuedAt ?? []).filter((at) => now.getTime() - Date.parse(at) < STEP_UP_ISSUE_WINDOW_MS);
  if (recent.length < STEP_UP_CODES_PER_WINDOW) return 0;
  return Date.parse(recent[recent.length - STEP_UP_CODES_PER_WINDOW]) + STEP_UP_ISSUE_WINDOW_MS - now.getTime();
}

function issue(command: Extract<StepUpCommand, { type: 'IssueStepUpCode' }>, state: StepUpState, now: Date): StepUpEvent[] {
  const retryAfterMs = stepUpRetryAfterMs(state, now);
  if (retryAfterMs > 0) {
    throw new DomainError(
      'step_up_rate_limited',
      `At most ${STEP_UP_CODES_PER_WINDOW} confirmation codes are sent per account every ${STEP_UP_ISSUE_WINDOW_MS / 60_000} minutes; use the latest one or retry later.`,
      { retry_after_ms: retryAfterMs },
    );
  }
  const expires_at = new Date(now.getTime() + STEP_UP_CODE_TTL_MS).toISOString();
  const { accountId: account_id, codeId: code_id, action, salt, codeHash: code_hash } = command;
  return [{ type: 'StepUpCodeIssued', data: { account_id, code_id, action, salt, code_hash, expires_at, scheme: STEP_UP_CODE_SCHEME } }];
}

/**
 * A right code is used up; a wrong one counts a try (recorded, so the count holds across
 * processes). No code, an expired one and one out of tries are refused without an event.
 */
function use(command: Extract<StepUpCommand, { type: 'UseStepUpCode' }>, state: StepUpState, now: Date): StepUpEvent[] {
  const active = state.codes[command.action];
  if (!active) throw new DomainError('step_up_invalid', 'No confirmation code was sent for this action, or it was used; ask for a new one.');
  if (now.getTime() >= Date.parse(active.expiresAt)) throw new DomainError('step_up_expired', 'The confirmation code has expired; ask for a new one.');
  if (active.wrongTries >= STEP_UP_MAX_WRONG_TRIES)
    throw new DomainError('step_up_invalid', 'The confirmation code was entered wrong too many times; ask for a new one.');
  const ids = { account_id: command.accountId, code_id: active.codeId, action: command.action };
  const presentedHash =
    active.scheme === STEP_UP_CODE_SCHEME
      ? command.codeKey
        ? stepUpCodeHmac(command.codeKey, active.salt, command.code)
        : null
      : stepUpCodeHash(active.salt, command.code);
  // Without the server's key an HMACed code cannot be checked: it counts as a wrong try.
  const presented = Buffer.from(presentedHash ?? '', 'hex');
  const stored = Buffer.from(active.codeHash, 'hex');
  if (presented.length === stored.length && timingSafeEqual(presented, stored)) return [{ type: 'StepUpCodeUsed', data: ids }];
  return [{ type: 'StepUpCodeRejected', data: { ...ids, wrong_tries: active.wrongTries + 1 } }];
}

export const stepUpDecider: Decider<StepUpCommand, StepUpState, StepUpEvent> = {
  initialState: () => ({ codes: {}, issuedAt: [] }),
  decide(command, state, now) {
    switch (command.type) {
      case 'IssueStepUpCode':
        return issue(command, state, now);
      case 'UseStepUpCode':
        return use(command, state, now);
    }
  },
  evolve(state, event) {
    const d = event.data;
    switch (event.type) {
      case 'StepUpCodeIssued': {
        const { salt, code_hash: codeHash, expires_at: expiresAt, scheme } = event.data;
        const issuedAt = [...(state.issuedAt ?? []), new Date(Date.parse(expiresAt) - STEP_UP_CODE_TTL_MS).toISOString()].slice(-STEP_UP_CODES_PER_WINDOW);
        return {
          codes: { ...state.codes, [d.action]: { codeId: d.code_id, salt, codeHash, expiresAt, wrongTries: 0, ...(scheme ? { scheme } : {}) } },
          issuedAt,
        };
      }
      case 'StepUpCodeUsed': {
        const { [d.action]: _used, ...rest } = state.codes;
        return { ...state, codes: rest };
      }
      case 'StepUpCodeRejected': {
        const active = state.codes[d.action];
        return active && active.codeId === d.code_id
          ? { ...state, codes: { ...state.codes, [d.action]: { ...active, wrongTries: event.data.wrong_tries } } }
          : state;
      }
    }
  },
};
