import { DEFAULT_POLICY, type AppliedGuardrail, type GuardrailPolicy } from '@svc/guardrails';
import type { Caller } from '@svc/identity';
import { speechOperation, speechRequest } from '@svc/interfaces';
import { DomainError } from '@svc/platform';
import { guardPrompt } from './operation';

// Issue 44: the guardrails' content filters also read the text a speech request speaks.
let version = 0;
// Each policy a version of its own: compiled policies are cached by guardrail and version.
const guarded = (content: Partial<GuardrailPolicy>): Caller => {
  const guardrail: AppliedGuardrail = {
    id: 'gr_1',
    scope: 'key',
    subject: 'k1',
    policy: { ...DEFAULT_POLICY, name: 'g', ...content },
    updatedAt: `v${++version}`,
  };
  return { guardrails: [guardrail] } as Pick<Caller, 'guardrails'> as Caller;
};
const call = () => speechRequest({ model: 'sim/tts', input: 'Write to jane.doe@example.com today.', voice: 'alloy' });

describe('content filters on speech input (issue 44)', () => {
  it('redact: the provider is asked to speak the redacted text, and its characters are what is counted', () => {
    const { request, findings } = guardPrompt(guarded({ content_filter_builtins: [{ slug: 'email', action: 'redact' }] }), speechOperation, call());
    expect(request.body.input).toBe('Write to [EMAIL] today.');
    expect(request.characters).toBe('Write to [EMAIL] today.'.length);
    expect(speechOperation.worstCase(request)).toEqual({ characters: 23 });
    expect(findings).toEqual([{ guardrail_id: 'gr_1', filter: 'email', action: 'redact', count: 1 }]);
  });

  it('block: refused with content_blocked naming the input field, never the text', () => {
    let thrown: unknown;
    try {
      guardPrompt(guarded({ content_filter_builtins: [{ slug: 'email', action: 'block' }] }), speechOperation, call());
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(DomainError);
    expect(thrown).toMatchObject({ code: 'content_blocked', details: { param: 'input', guardrail_id: 'gr_1' } });
    expect((thrown as Error).message).not.toContain('jane');
  });

  it('flag: the request goes on unchanged, with what was found', () => {
    const original = call();
    const { request, findings } = guardPrompt(guarded({ content_filter_builtins: [{ slug: 'email', action: 'flag' }] }), speechOperation, original);
    expect(request).toBe(original);
    expect(findings).toEqual([{ guardrail_id: 'gr_1', filter: 'email', action: 'flag', count: 1 }]);
  });
});
