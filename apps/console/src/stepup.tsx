import { createContext, useCallback, useContext, useRef, useState, type ReactNode } from 'react';
import { api, ApiFailure } from './api';
import { Dialog, ErrorText } from './ui';

/** The sensitive actions of docs/api/settings-webhooks.md "Email step-up", each needing its own code. */
export type StepUpAction = 'create_key' | 'rotate_key' | 'grant_management' | 'save_webhook' | 'change_step_up' | 'save_provider_key' | 'delete_organization';

const WHAT: Record<StepUpAction, string> = {
  create_key: 'creating a key',
  rotate_key: 'rotating a key',
  grant_management: 'granting the management scope',
  save_webhook: 'saving the webhook',
  change_step_up: 'changing the step-up setting',
  save_provider_key: 'saving a provider key',
  delete_organization: 'deleting an organization',
};

/** Makes a call that may need a step-up code: `headers` carries the code on the retry. */
export type WithStepUp = <T>(action: StepUpAction, call: (headers: Record<string, string>) => Promise<T>) => Promise<T>;

const StepUpContext = createContext<WithStepUp | null>(null);

export function useStepUp(): WithStepUp {
  const context = useContext(StepUpContext);
  if (!context) throw new Error('useStepUp outside StepUpProvider');
  return context;
}

interface Pending {
  action: StepUpAction;
  sentTo: string;
  error: unknown;
  /** Answers the dialog: the code typed, or null when cancelled. */
  answer: (code: string | null) => void;
}

const RETRYABLE = new Set(['step_up_invalid', 'step_up_expired']);

/**
 * When the API answers 403 `step_up_required`, asks it to mail a code for that action, asks the
 * user for the code, and makes the call again with it in X-Svc-Step-Up-Code. A wrong or expired
 * code is said in the dialog, which can mail a new one.
 */
export function StepUpProvider({ children }: { children: ReactNode }) {
  const [pending, setPending] = useState<Pending | null>(null);
  const [code, setCode] = useState('');
  const [busy, setBusy] = useState(false);
  const pendingRef = useRef<Pending | null>(null);

  const ask = (action: StepUpAction, sentTo: string, error: unknown) =>
    new Promise<string | null>((resolve) => {
      const next = { action, sentTo, error, answer: resolve };
      pendingRef.current = next;
      setCode('');
      setPending(next);
    });

  const sendCode = async (action: StepUpAction): Promise<string> => {
    const { data } = await api<{ data: { sent_to: string } }>('POST', '/step-up/codes', { body: { action } });
    return data.sent_to;
  };

  const withStepUp = useCallback<WithStepUp>(async (action, call) => {
    try {
      return await call({});
    } catch (err) {
      if (!(err instanceof ApiFailure) || err.code !== 'step_up_required') throw err;
    }
    let sentTo = await sendCode(action);
    let error: unknown = null;
    for (;;) {
      const typed = await ask(action, sentTo, error);
      if (typed === null) {
        setPending(null);
        throw new ApiFailure(403, 'step_up_cancelled', null, `Cancelled: ${WHAT[action]} needs the emailed confirmation code.`);
      }
      if (typed === '') {
        // "Send a new code": the old one stops counting once a new one is mailed.
        sentTo = await sendCode(action).catch((e: unknown) => ((error = e), sentTo));
        continue;
      }
      try {
        setBusy(true);
        const result = await call({ 'x-svc-step-up-code': typed });
        setPending(null);
        return result;
      } catch (err) {
        if (!(err instanceof ApiFailure) || !(RETRYABLE.has(err.code ?? '') || err.param === 'X-Svc-Step-Up-Code')) {
          setPending(null);
          throw err;
        }
        error = err;
      } finally {
        setBusy(false);
      }
    }
  }, []);

  const answer = (value: string | null) => pendingRef.current?.answer(value);

  return (
    <StepUpContext.Provider value={withStepUp}>
      {children}
      <Dialog open={pending !== null} title="Confirm with the emailed code" onClose={() => answer(null)}>
        {pending && (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              answer(code.trim());
            }}
          >
            <p>
              This account asks for a confirmation code before {WHAT[pending.action]}. We emailed a 6-digit code to <strong>{pending.sentTo}</strong>; it is
              valid for 15 minutes.
            </p>
            <label htmlFor="step-up-code">Confirmation code</label>
            <input
              id="step-up-code"
              name="step-up-code"
              inputMode="numeric"
              autoComplete="one-time-code"
              pattern="[0-9]{6}"
              required
              value={code}
              onChange={(e) => setCode(e.target.value)}
              aria-describedby={pending.error ? 'step-up-error' : undefined}
              autoFocus
            />
            <ErrorText error={pending.error} id="step-up-error" />
            <div className="dialog-actions">
              <button type="button" className="secondary" onClick={() => answer(null)} disabled={busy}>
                Cancel
              </button>
              <button type="button" className="secondary" onClick={() => answer('')} disabled={busy}>
                Send a new code
              </button>
              <button type="submit" disabled={busy}>
                {busy ? 'Checking…' : 'Confirm'}
              </button>
            </div>
          </form>
        )}
      </Dialog>
    </StepUpContext.Provider>
  );
}
