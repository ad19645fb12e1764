import { STEP_UP_ACTIONS } from '../../../../libs/identity/src/step-up';
import { refusal } from '../testing/errors';
import { PROTECTED_ACTIONS, stepUpBody, stepUpChanged, stepUpFormOf } from './securityForm';

describe('step-up form', () => {
  it('round-trips the setting, trimming the address', () => {
    expect(stepUpFormOf({ enabled: false, email: null })).toEqual({ enabled: false, email: '' });
    expect(stepUpBody({ enabled: true, email: ' ops@example.com ' })).toEqual({ step_up: { enabled: true, email: 'ops@example.com' } });
  });

  it('clears an empty address when off, and refuses one when on', () => {
    expect(stepUpBody({ enabled: false, email: '' })).toEqual({ step_up: { enabled: false, email: null } });
    expect(refusal(() => stepUpBody({ enabled: true, email: ' ' }))).toMatchObject({ param: 'step_up.email', code: 'step_up_email_required' });
  });

  it('refuses something that is not an address, on or off', () => {
    expect(refusal(() => stepUpBody({ enabled: false, email: 'ops at example' })).param).toBe('step_up.email');
  });

  it('tells a changed form from the setting', () => {
    const setting = { enabled: true, email: 'ops@example.com' };
    expect(stepUpChanged(setting, { enabled: true, email: 'ops@example.com ' })).toBe(false);
    expect(stepUpChanged(setting, { enabled: false, email: 'ops@example.com' })).toBe(true);
    expect(stepUpChanged(setting, { enabled: true, email: 'sec@example.com' })).toBe(true);
  });

  it("names every action of the server's list, once", () => {
    const actions = PROTECTED_ACTIONS.map((a) => a.action);
    expect([...actions].sort()).toEqual([...STEP_UP_ACTIONS].sort());
  });
});
