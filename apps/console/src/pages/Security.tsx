import { useState, type FormEvent } from 'react';
import { api, type Session } from '../api';
import type { Settings, StepUpSetting } from '../records';
import { useStepUp } from '../stepup';
import { Card, ErrorText, FieldError, FormError, isAbout, Loading, Notice, Page, useAction } from '../ui';
import { PROTECTED_ACTIONS, stepUpBody, stepUpChanged, stepUpFormOf, type StepUpForm } from './securityForm';
import { useSetting } from './useSetting';
import './Security.css';

const EMAIL_FIELD = 'step_up.email';

export function Security(_: { session: Session }) {
  const { settings, setting, setSetting } = useSetting('step_up');

  return (
    <Page
      title="Security"
      intro="Email step-up: a 6-digit code, mailed to an address you choose, before the actions that could hand this account to someone else."
    >
      {setting ? (
        <StepUpCard setting={setting} onSaved={setSetting} />
      ) : (
        <Card title="Email step-up">{settings.error ? <ErrorText error={settings.error} /> : <Loading what="the step-up setting" />}</Card>
      )}
      <ProtectedCard />
    </Page>
  );
}

function StepUpCard({ setting, onSaved }: { setting: StepUpSetting; onSaved: (setting: StepUpSetting) => void }) {
  const withStepUp = useStepUp();
  const [form, setForm] = useState<StepUpForm>(() => stepUpFormOf(setting));
  const [saved, setSaved] = useState<string | null>(null);
  const { busy, error, setError, run } = useAction();
  const changed = stepUpChanged(setting, form);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(null);
    let body: ReturnType<typeof stepUpBody>;
    try {
      body = stepUpBody(form);
    } catch (err) {
      setError(err);
      return;
    }
    // The server asks for a code only while step-up is on; withStepUp asks for it then.
    const answer = await run(() => withStepUp('change_step_up', (headers) => api<{ data: Settings }>('PATCH', '/settings', { body, headers })));
    if (!answer) return;
    const next = answer.data.step_up;
    onSaved(next);
    setForm(stepUpFormOf(next));
    setSaved(next.enabled ? `Saved: step-up is on; codes go to ${next.email}.` : 'Saved: step-up is off; no action asks for a code.');
  };

  const emailInvalid = isAbout(error, EMAIL_FIELD);
  return (
    <Card
      title={
        <>
          Email step-up <span className={setting.enabled ? 'badge ok' : 'badge'}>{setting.enabled ? 'On' : 'Off'}</span>
        </>
      }
    >
      <p>
        {setting.enabled ? (
          <>
            On: the actions below need a code mailed to <strong>{setting.email}</strong>.
          </>
        ) : (
          'Off: a management key alone is enough for every action below.'
        )}
      </p>
      <form onSubmit={submit} noValidate aria-label="Step-up setting">
        <div className="field">
          <label>
            <input type="checkbox" id="step-up-enabled" checked={form.enabled} onChange={(e) => setForm({ ...form, enabled: e.target.checked })} />
            Ask for an emailed code before sensitive actions
          </label>
        </div>
        <div className="field security-email">
          <label htmlFor="step-up-email">Email for confirmation codes</label>
          <input
            id="step-up-email"
            type="email"
            inputMode="email"
            autoComplete="email"
            spellCheck={false}
            placeholder="security@example.com"
            value={form.email}
            onChange={(e) => setForm({ ...form, email: e.target.value })}
            aria-invalid={emailInvalid ? true : undefined}
            aria-describedby={emailInvalid ? `${EMAIL_FIELD}-error` : 'step-up-email-hint'}
          />
          <p className="hint" id="step-up-email-hint">
            {setting.enabled
              ? `While step-up is on, saving a change here needs a code sent to the current address (${setting.email}), so a leaked management key cannot switch it off.`
              : 'Turning step-up on needs no code. From then on, turning it off or changing this address needs one.'}
          </p>
          <FieldError error={error} field={EMAIL_FIELD} />
        </div>
        <FormError error={error} fields={[EMAIL_FIELD]} />
        <Notice>{saved}</Notice>
        <div className="form-actions">
          <button type="submit" disabled={busy || !changed}>
            {busy ? 'Saving…' : 'Save step-up setting'}
          </button>
          {!changed && !busy && <span className="hint">Nothing to save: the form matches the setting.</span>}
        </div>
      </form>
    </Card>
  );
}

function ProtectedCard() {
  return (
    <Card title="What step-up protects">
      <p>While it is on, each of these asks for its own code, in this console as through the API:</p>
      <ul className="security-actions">
        {PROTECTED_ACTIONS.map((a) => (
          <li key={a.action}>
            {a.words} <span className="muted">({a.page})</span>
          </li>
        ))}
      </ul>
      <h3>How codes work</h3>
      <ul className="security-actions">
        <li>A code is 6 digits, mailed to the address above when an action asks for one; the console then asks you to type it.</li>
        <li>It works once, for the action it was sent for, for 15 minutes; five wrong tries void it. You can ask for a new one.</li>
        <li>Reading settings, keys, logs and activity never needs a code.</li>
      </ul>
    </Card>
  );
}
