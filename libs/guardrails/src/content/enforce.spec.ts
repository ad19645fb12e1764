import { errorOf } from '@svc/platform/testing/errors';
import type { AppliedGuardrail } from '../effective';
import type { GuardrailPolicy } from '../guardrail';
import { DEFAULT_POLICY } from '../policy-request';
import { ContentPolicyCache, enforceContentPolicies } from './enforce';

// Issue 44: every applied guardrail's content filters, in order, over the prompt as it came.
const guardrail = (id: string, over: Partial<GuardrailPolicy>, updatedAt = '2026-11-01T00:00:00.000Z'): AppliedGuardrail => ({
  id,
  scope: 'key',
  subject: 'k1',
  policy: { ...DEFAULT_POLICY, name: `Name of ${id}`, ...over },
  updatedAt,
});
const org = guardrail('g_org', { content_filter_builtins: [{ slug: 'email', action: 'redact' }] });
const key = guardrail('g_key', { content_filters: [{ pattern: 'project-[0-9]+', action: 'flag', label: 'PROJECT' }] });
const blocker = guardrail('g_block', { content_filter_builtins: [{ slug: 'email', action: 'block' }] });
const TEXTS = ['mail ann@example.com about project-7', 'and bob@example.org, project-9 too'];

describe('enforcing the guardrails content filters on a prompt (issue 44)', () => {
  it('redacts and flags, each finding under its guardrail, counts over all the texts', () => {
    const enforced = enforceContentPolicies([org, key], TEXTS, 'messages', new ContentPolicyCache());
    expect(enforced.texts).toEqual(['mail [EMAIL] about project-7', 'and [EMAIL], project-9 too']);
    expect(enforced.findings).toEqual([
      { guardrail_id: 'g_org', filter: 'email', action: 'redact', count: 2 },
      { guardrail_id: 'g_key', filter: 'content_filters[0]', action: 'flag', count: 2 },
    ]);
  });

  it("blocks on any guardrail's block, though another redacts the same match; the refusal names the guardrail and filter, never the text", () => {
    const err = errorOf(() => enforceContentPolicies([org, blocker], TEXTS, 'input', new ContentPolicyCache()));
    expect(err).toMatchObject({ status: 400, code: 'content_blocked', param: 'input' });
    expect(err.message).toContain('g_block');
    expect(err.message).toContain('email');
    expect(err.message).not.toContain('example');
  });

  it('nothing to look for: the texts go on as they came', () => {
    expect(enforceContentPolicies([guardrail('g_open', {})], TEXTS, 'messages', new ContentPolicyCache())).toEqual({ texts: TEXTS, findings: [] });
  });

  it('texts too large to scan whole are refused 413', () => {
    const err = errorOf(() => enforceContentPolicies([org], ['x'.repeat(64)], 'prompt', new ContentPolicyCache(), { maxTotalBytes: 32 }));
    expect(err).toMatchObject({ status: 413, code: 'content_too_large', param: 'prompt' });
  });

  it('compiles a guardrail once per version, and afresh when it changed; the least recently used leaves first', () => {
    const cache = new ContentPolicyCache(2);
    const first = cache.of(org);
    expect(cache.of(org)).toBe(first);
    const changed = guardrail('g_org', { content_filter_builtins: [{ slug: 'email', action: 'block' }] }, '2026-11-02T00:00:00.000Z');
    expect(cache.of(changed)).not.toBe(first);
    expect(cache.of(changed).filters[0].action).toBe('block');
    cache.of(key);
    expect(cache.size).toBe(2);
    expect(cache.of(org)).not.toBe(first);
  });
});
