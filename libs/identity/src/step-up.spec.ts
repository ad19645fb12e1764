import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { randomBytes } from 'node:crypto';
import {
  STEP_UP_CODE_SCHEME,
  STEP_UP_CODE_TTL_MS,
  STEP_UP_CODES_PER_WINDOW,
  STEP_UP_ISSUE_WINDOW_MS,
  stepUpCodeHash,
  stepUpCodeHmac,
  stepUpCodeKey,
  stepUpDecider,
  stepUpRetryAfterMs,
  type StepUpEvent,
} from './step-up';

const NOW = new Date('2026-11-02T10:00:00Z');
const at = (ms: number) => () => new Date(NOW.getTime() + ms);
const spec = deciderSpec(stepUpDecider, at(0));
const KEY = stepUpCodeKey(randomBytes(32));
const issuedAt = (ms: number, codeId = 'c1', action: 'create_key' | 'rotate_key' = 'create_key'): StepUpEvent => ({
  type: 'StepUpCodeIssued',
  data: {
    account_id: 'a1',
    code_id: codeId,
    action,
    salt: 's1',
    code_hash: stepUpCodeHmac(KEY, 's1', '123456'),
    expires_at: new Date(NOW.getTime() + ms + STEP_UP_CODE_TTL_MS).toISOString(),
    scheme: STEP_UP_CODE_SCHEME,
  },
});
const issued = issuedAt(0);
const use = (code: string, action: 'create_key' | 'rotate_key' = 'create_key', codeKey: Buffer | null = KEY) => ({
  type: 'UseStepUpCode' as const,
  accountId: 'a1',
  action,
  code,
  codeKey,
});
const used: StepUpEvent = { type: 'StepUpCodeUsed', data: { account_id: 'a1', code_id: 'c1', action: 'create_key' } };
const wrong = (n: number): StepUpEvent => ({ type: 'StepUpCodeRejected', data: { account_id: 'a1', code_id: 'c1', action: 'create_key', wrong_tries: n } });

describe('email step-up codes (spec 1, 8)', () => {
  const issue = (codeId = 'c1') => ({
    type: 'IssueStepUpCode' as const,
    accountId: 'a1',
    action: 'create_key' as const,
    codeId,
    salt: 's1',
    codeHash: stepUpCodeHmac(KEY, 's1', '123456'),
  });

  it('issues a code valid 15 minutes, recorded only by its salted HMAC under the server key (issue 41 S2)', () => {
    spec.given([]).when(issue()).then([issued]);
    expect(JSON.stringify(issued)).not.toContain('123456');
    // The bare salted hash, reversible by trying the million codes, is not what is stored.
    expect(issued.data).not.toMatchObject({ code_hash: stepUpCodeHash('s1', '123456') });
    // Another server key does not match: the stored value is useless without this one.
    spec
      .given([issued])
      .when(use('123456', 'create_key', stepUpCodeKey(randomBytes(32))))
      .then([wrong(1)]);
    // Without the server key an HMACed code cannot be confirmed; it counts as a wrong try.
    spec
      .given([issued])
      .when(use('123456', 'create_key', null))
      .then([wrong(1)]);
  });

  it('a code issued before the HMAC scheme (a bare salted hash) still works for its 15 minutes', () => {
    const legacy: StepUpEvent = {
      type: 'StepUpCodeIssued',
      data: {
        account_id: 'a1',
        code_id: 'c1',
        action: 'create_key',
        salt: 's1',
        code_hash: stepUpCodeHash('s1', '123456'),
        expires_at: new Date(NOW.getTime() + STEP_UP_CODE_TTL_MS).toISOString(),
      },
    };
    spec.given([legacy]).when(use('123456')).then([used]);
    spec
      .given([legacy])
      .when(use('123457'))
      .then([wrong(1)]);
    deciderSpec(stepUpDecider, at(STEP_UP_CODE_TTL_MS)).given([legacy]).when(use('123456')).thenThrows('step_up_expired');
  });

  it(`issues at most ${STEP_UP_CODES_PER_WINDOW} codes per account in ${STEP_UP_ISSUE_WINDOW_MS / 60_000} minutes, on the clock`, () => {
    const five = [0, 1, 2, 3, 4].map((i) => issuedAt(i * 60_000, `c${i}`));
    deciderSpec(stepUpDecider, at(4 * 60_000))
      .given(five.slice(0, 4))
      .when(issue('c4'))
      .then([{ ...issuedAt(4 * 60_000, 'c4') }]);
    deciderSpec(stepUpDecider, at(5 * 60_000))
      .given(five)
      .when(issue('c5'))
      .thenThrows('step_up_rate_limited');
    // Used or not, an issued code counts: using them does not buy more mail.
    deciderSpec(stepUpDecider, at(5 * 60_000))
      .given([...five, used])
      .when(issue('c5'))
      .thenThrows('step_up_rate_limited');
    // The oldest leaves the window 10 minutes after it was issued.
    deciderSpec(stepUpDecider, at(STEP_UP_ISSUE_WINDOW_MS - 1))
      .given(five)
      .when(issue('c5'))
      .thenThrows('step_up_rate_limited');
    deciderSpec(stepUpDecider, at(STEP_UP_ISSUE_WINDOW_MS))
      .given(five)
      .when(issue('c5'))
      .then([issuedAt(STEP_UP_ISSUE_WINDOW_MS, 'c5')]);
    let state = stepUpDecider.initialState();
    for (const e of five) state = stepUpDecider.evolve(state, e);
    expect(stepUpRetryAfterMs(state, new Date(NOW.getTime() + 5 * 60_000))).toBe(5 * 60_000);
    expect(stepUpRetryAfterMs(state, new Date(NOW.getTime() + STEP_UP_ISSUE_WINDOW_MS))).toBe(0);
  });

  it('the right code works once, for its action only', () => {
    spec.given([issued]).when(use('123456')).then([used]);
    spec.given([issued, used]).when(use('123456')).thenThrows('step_up_invalid');
    spec.given([issued]).when(use('123456', 'rotate_key')).thenThrows('step_up_invalid');
    spec.given([]).when(use('123456')).thenThrows('step_up_invalid');
  });

  it('expires after 15 minutes on the clock', () => {
    deciderSpec(stepUpDecider, at(STEP_UP_CODE_TTL_MS - 1))
      .given([issued])
      .when(use('123456'))
      .then([used]);
    deciderSpec(stepUpDecider, at(STEP_UP_CODE_TTL_MS)).given([issued]).when(use('123456')).thenThrows('step_up_expired');
  });

  it('counts wrong tries; after 5 the right code fails too', () => {
    spec
      .given([issued])
      .when(use('654321'))
      .then([wrong(1)]);
    spec
      .given([issued, wrong(1), wrong(2), wrong(3)])
      .when(use('000000'))
      .then([wrong(4)]);
    spec
      .given([issued, wrong(1), wrong(2), wrong(3), wrong(4)])
      .when(use('123456'))
      .then([used]);
    spec
      .given([issued, wrong(1), wrong(2), wrong(3), wrong(4), wrong(5)])
      .when(use('123456'))
      .thenThrows('step_up_invalid');
  });

  it('a new code replaces the last one of its action', () => {
    const again: StepUpEvent = {
      ...issued,
      data: { ...issued.data, code_id: 'c2', salt: 's2', code_hash: stepUpCodeHmac(KEY, 's2', '999999') },
    } as StepUpEvent;
    spec
      .given([issued, wrong(1), again])
      .when(use('123456'))
      .then([{ type: 'StepUpCodeRejected', data: { account_id: 'a1', code_id: 'c2', action: 'create_key', wrong_tries: 1 } }]);
    spec
      .given([issued, again])
      .when(use('999999'))
      .then([{ type: 'StepUpCodeUsed', data: { account_id: 'a1', code_id: 'c2', action: 'create_key' } }]);
  });
});
