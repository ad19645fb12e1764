import { fold } from '@svc/eventstore';
import { accessPolicyOf, appliedGuardrails, budgetsOf, modelRefusal, narrowingGuardrails, narrowPreferences } from './effective';
import { guardrailsDecider, type GuardrailEvent, type GuardrailPolicy } from './guardrail';
import { DEFAULT_POLICY } from './policy-request';

// Issue 44: what applies to one request — budgets stack, access rules intersect.
const W = 'org1';
const at = '2026-11-02T10:00:00.000Z';
const policy = (name: string, over: Partial<GuardrailPolicy> = {}): GuardrailPolicy => ({ name, ...DEFAULT_POLICY, ...over });
const created = (id: string, p: GuardrailPolicy): GuardrailEvent => ({ type: 'GuardrailCreated', data: { workspace_id: W, guardrail_id: id, policy: p, at } });
const assigned = (id: string, scope: 'key' | 'member', subjects: string[]): GuardrailEvent => ({
  type: 'GuardrailAssigned',
  data: { workspace_id: W, guardrail_id: id, scope, subjects, at },
});
const orgWide = (id: string): GuardrailEvent => ({ type: 'OrganizationGuardrailSet', data: { workspace_id: W, guardrail_id: id, at } });

const state = fold(guardrailsDecider, [
  created(
    'g_org',
    policy('Org', { limit_nano: '100', reset_interval: 'monthly', allowed_providers: ['openai', 'anthropic', 'google'], ignored_models: ['x/banned'] }),
  ),
  created(
    'g_member',
    policy('Member', { limit_nano: '40', include_byok_in_budgets: true, allowed_providers: ['openai', 'anthropic', 'mistral'], enforce_zdr: true }),
  ),
  created('g_key', policy('Key', { limit_nano: '10', reset_interval: 'daily', allowed_models: ['openai/gpt-4o', 'anthropic/claude'] })),
  created('g_open', policy('Open')),
  orgWide('g_org'),
  assigned('g_member', 'member', ['u1']),
  assigned('g_key', 'key', ['k1']),
  assigned('g_open', 'key', ['k2']),
]);

describe('the guardrails that apply to a request (issue 44)', () => {
  it('are the organization’s, the member’s and the key’s, widest first', () => {
    const applied = appliedGuardrails(state, { workspaceId: W, keyId: 'k1', memberId: 'u1' });
    expect(applied.map((a) => [a.id, a.scope, a.subject])).toEqual([
      ['g_org', 'organization', W],
      ['g_member', 'member', 'u1'],
      ['g_key', 'key', 'k1'],
    ]);
    // The account's own key (no member) gets the organization's alone.
    expect(appliedGuardrails(state, { workspaceId: W, keyId: 'k9', memberId: null }).map((a) => a.id)).toEqual(['g_org']);
  });

  it('budgets stack: one per guardrail with a limit; a BYOK request skips those that leave BYOK out', () => {
    const applied = appliedGuardrails(state, { workspaceId: W, keyId: 'k1', memberId: 'u1' });
    expect(budgetsOf(applied, false)).toEqual([
      { guardrailId: 'g_org', name: 'Org', scope: 'organization', subject: W, limitNano: 100n, reset: 'monthly' },
      { guardrailId: 'g_member', name: 'Member', scope: 'member', subject: 'u1', limitNano: 40n, reset: 'never' },
      { guardrailId: 'g_key', name: 'Key', scope: 'key', subject: 'k1', limitNano: 10n, reset: 'daily' },
    ]);
    expect(budgetsOf(applied, true).map((b) => b.guardrailId)).toEqual(['g_member']);
    expect(budgetsOf(appliedGuardrails(state, { workspaceId: W, keyId: 'k2', memberId: null }), false).map((b) => b.guardrailId)).toEqual(['g_org']);
  });

  it('a narrower guardrail narrows but never widens: providers intersect, ignores add up, zdr sticks', () => {
    const access = accessPolicyOf(appliedGuardrails(state, { workspaceId: W, keyId: 'k1', memberId: 'u1' }));
    // mistral is the member's, not the organization's: not allowed.
    expect([...access.allowedProviders!.names].sort()).toEqual(['anthropic', 'openai']);
    expect(narrowPreferences(access, { only: ['mistral', 'openai'], ignore: ['azure'] })).toEqual({ only: ['openai'], ignore: ['azure'], zdr: true });
    expect(narrowPreferences(access, {})).toEqual({ only: ['openai', 'anthropic'], zdr: true });
    expect(narrowingGuardrails(access)).toEqual(['g_org', 'g_member']);
  });

  it('refuses a model no guardrail allows, or one a guardrail ignores, naming the guardrail', () => {
    const access = accessPolicyOf(appliedGuardrails(state, { workspaceId: W, keyId: 'k1', memberId: 'u1' }));
    expect(modelRefusal(access, 'openai/gpt-4o')).toBeNull();
    expect(modelRefusal(access, 'google/gemini')).toMatchObject({
      code: 'model_not_allowed',
      kind: 'forbidden',
      details: { param: 'model', guardrail_id: 'g_key' },
    });
    expect(modelRefusal(access, 'x/banned')).toMatchObject({ code: 'model_not_allowed', details: { guardrail_id: 'g_org' } });
    // Without the key's allowlist, only the organization's ignore applies.
    const member = accessPolicyOf(appliedGuardrails(state, { workspaceId: W, keyId: 'k2', memberId: 'u1' }));
    expect(modelRefusal(member, 'google/gemini')).toBeNull();
    expect(modelRefusal(member, 'x/banned')).not.toBeNull();
  });

  it('no guardrail: nothing changes', () => {
    const access = accessPolicyOf([]);
    const preferences = { only: ['a'], sort: 'price' as const };
    expect(narrowPreferences(access, preferences)).toEqual(preferences);
    expect(modelRefusal(access, 'any/model')).toBeNull();
  });
});
