import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { STEP_UP_CODE_TTL_MS, stepUpCodeHash, stepUpDecider, type StepUpEvent } from './step-up';

const NOW = new Date('2026-11-02T10:00:00Z');
const at = (ms: number) => () => new Date(NOW.getTime() + ms);
const spec = deciderSpec(stepUpDecider, at(0));
const issued: StepUpEvent = {
  type: 'StepUpCodeIssued',
  data: { account_id: 'a1', code_id: 'c1', action: 'create_key', salt: 's1', code_hash: stepUpCodeHash('s1', '123456'), expires_at: new Date(NOW.getTime() + STEP_UP_CODE_TTL_MS).toISOString() },
};
const use = (code: string, action: 'create_key' | 'rotate_key' = 'create_key') => ({ type: 'UseStepUpCode' as const, accountId: 'a1', action, code });
const used: StepUpEvent = { type: 'StepUpCodeUsed', data: { account_id: 'a1', code_id: 'c1', action: 'create_key' } };
const wrong = (n: number): StepUpEvent => ({ type: 'StepUpCodeRejected', data: { account_id: 'a1', code_id: 'c1', action: 'create_key', wrong_tries: n } });

describe('email step-up codes (spec 1, 8)', () => {
  it('issues a code valid 15 minutes, recorded only by its salted hash', () => {
    spec.given([]).when({ type: 'IssueStepUpCode', accountId: 'a1', action: 'create_key', codeId: 'c1', salt: 's1', codeHash: stepUpCodeHash('s1', '123456') }).then([issued]);
    expect(JSON.stringify(issued)).not.toContain('123456');
  });

  it('the right code works once, for its action only', () => {
    spec.given([issued]).when(use('123456')).then([used]);
    spec.given([issued, used]).when(use('123456')).thenThrows('step_up_invalid');
    spec.given([issued]).when(use('123456', 'rotate_key')).thenThrows('step_up_invalid');
    spec.given([]).when(use('123456')).thenThrows('step_up_invalid');
  });

  it('expires after 15 minutes on the clock', () => {
    deciderSpec(stepUpDecider, at(STEP_UP_CODE_TTL_MS - 1)).given([issued]).when(use('123456')).then([used]);
    deciderSpec(stepUpDecider, at(STEP_UP_CODE_TTL_MS)).given([issued]).when(use('123456')).thenThrows('step_up_expired');
  });

  it('counts wrong tries; after 5 the right code fails too', () => {
    spec.given([issued]).when(use('654321')).then([wrong(1)]);
    spec.given([issued, wrong(1), wrong(2), wrong(3)]).when(use('000000')).then([wrong(4)]);
    spec.given([issued, wrong(1), wrong(2), wrong(3), wrong(4)]).when(use('123456')).then([used]);
    spec.given([issued, wrong(1), wrong(2), wrong(3), wrong(4), wrong(5)]).when(use('123456')).thenThrows('step_up_invalid');
  });

  it('a new code replaces the last one of its action', () => {
    const again: StepUpEvent = { ...issued, data: { ...issued.data, code_id: 'c2', salt: 's2', code_hash: stepUpCodeHash('s2', '999999') } } as StepUpEvent;
    spec.given([issued, wrong(1), again]).when(use('123456')).then([{ type: 'StepUpCodeRejected', data: { account_id: 'a1', code_id: 'c2', action: 'create_key', wrong_tries: 1 } }]);
    spec.given([issued, again]).when(use('999999')).then([{ type: 'StepUpCodeUsed', data: { account_id: 'a1', code_id: 'c2', action: 'create_key' } }]);
  });
});
