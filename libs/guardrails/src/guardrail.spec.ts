import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { fold } from '@svc/eventstore';
import { guardrailsDecider, MAX_GUARDRAILS, type GuardrailEvent, type GuardrailPolicy } from './guardrail';
import { DEFAULT_POLICY } from './policy-request';

// Issue 44: a workspace's guardrails and their assignments, one stream per workspace.
const NOW = '2026-11-02T10:00:00.000Z';
const spec = deciderSpec(guardrailsDecider, () => new Date(NOW));
const W = 'org1';
const policy = (name: string, over: Partial<GuardrailPolicy> = {}): GuardrailPolicy => ({ name, ...DEFAULT_POLICY, ...over });
const created = (id: string, p = policy(id)): GuardrailEvent => ({ type: 'GuardrailCreated', data: { workspace_id: W, guardrail_id: id, policy: p, at: NOW } });
const assigned = (id: string, scope: 'key' | 'member', subjects: string[]): GuardrailEvent => ({
  type: 'GuardrailAssigned',
  data: { workspace_id: W, guardrail_id: id, scope, subjects, at: NOW },
});
const assign = (id: string, scope: 'key' | 'member', subjects: string[]) => ({
  type: 'AssignGuardrail' as const,
  workspaceId: W,
  guardrailId: id,
  scope,
  subjects,
});

describe('workspace guardrails (issue 44)', () => {
  it('creates a guardrail once; its id is refused again', () => {
    spec
      .given([])
      .when({ type: 'CreateGuardrail', workspaceId: W, guardrailId: 'g1', policy: policy('g1') })
      .then([created('g1')]);
    spec
      .given([created('g1')])
      .when({ type: 'CreateGuardrail', workspaceId: W, guardrailId: 'g1', policy: policy('g1') })
      .thenThrows('guardrail_exists');
  });

  it(`holds at most ${MAX_GUARDRAILS} guardrails`, () => {
    const full = Array.from({ length: MAX_GUARDRAILS }, (_, i) => created(`g${i}`));
    spec
      .given(full)
      .when({ type: 'CreateGuardrail', workspaceId: W, guardrailId: 'one-more', policy: policy('x') })
      .thenThrows('guardrail_limit_reached');
  });

  it('an update that changes nothing records nothing; one that does records the whole new policy', () => {
    spec
      .given([created('g1')])
      .when({ type: 'UpdateGuardrail', workspaceId: W, guardrailId: 'g1', policy: policy('g1') })
      .then([]);
    const tighter = policy('g1', { limit_nano: '5000000000', reset_interval: 'daily' });
    spec
      .given([created('g1')])
      .when({ type: 'UpdateGuardrail', workspaceId: W, guardrailId: 'g1', policy: tighter })
      .then([{ type: 'GuardrailUpdated', data: { workspace_id: W, guardrail_id: 'g1', policy: tighter, at: NOW } }]);
    spec.given([]).when({ type: 'UpdateGuardrail', workspaceId: W, guardrailId: 'nope', policy: tighter }).thenThrows('guardrail_not_found');
  });

  it('a key or member holds at most one guardrail: assigning another replaces it, and only the new subjects are recorded', () => {
    const given = [created('g1'), created('g2'), assigned('g1', 'key', ['k1', 'k2'])];
    spec
      .given(given)
      .when(assign('g2', 'key', ['k2', 'k3', 'k3']))
      .then([assigned('g2', 'key', ['k2', 'k3'])]);
    const state = fold(guardrailsDecider, [...given, assigned('g2', 'key', ['k2', 'k3'])]);
    expect(state.assignments.key).toEqual({ k1: 'g1', k2: 'g2', k3: 'g2' });
    // Already on g1: nothing new.
    spec
      .given(given)
      .when(assign('g1', 'key', ['k1']))
      .then([]);
  });

  it('keys and members are separate scopes', () => {
    const state = fold(guardrailsDecider, [created('g1'), assigned('g1', 'member', ['u1']), assigned('g1', 'key', ['u1'])]);
    expect(state.assignments).toEqual({ key: { u1: 'g1' }, member: { u1: 'g1' } });
  });

  it('unassigning removes only the subjects that are on this guardrail', () => {
    const given = [created('g1'), created('g2'), assigned('g1', 'member', ['u1', 'u2']), assigned('g2', 'member', ['u3'])];
    spec
      .given(given)
      .when({ type: 'UnassignGuardrail', workspaceId: W, guardrailId: 'g1', scope: 'member', subjects: ['u2', 'u3', 'u9'] })
      .then([{ type: 'GuardrailUnassigned', data: { workspace_id: W, guardrail_id: 'g1', scope: 'member', subjects: ['u2'], at: NOW } }]);
  });

  it('the organization has one workspace-wide guardrail at a time', () => {
    const given = [
      created('g1'),
      created('g2'),
      { type: 'OrganizationGuardrailSet', data: { workspace_id: W, guardrail_id: 'g1', at: NOW } } as GuardrailEvent,
    ];
    spec
      .given(given)
      .when({ type: 'SetOrganizationGuardrail', workspaceId: W, guardrailId: 'g2' })
      .then([{ type: 'OrganizationGuardrailSet', data: { workspace_id: W, guardrail_id: 'g2', at: NOW } }]);
    spec.given(given).when({ type: 'SetOrganizationGuardrail', workspaceId: W, guardrailId: 'g1' }).then([]);
    // Removing a guardrail that is not the organization's changes nothing.
    spec.given(given).when({ type: 'RemoveOrganizationGuardrail', workspaceId: W, guardrailId: 'g2' }).then([]);
    spec
      .given(given)
      .when({ type: 'RemoveOrganizationGuardrail', workspaceId: W, guardrailId: 'g1' })
      .then([{ type: 'OrganizationGuardrailRemoved', data: { workspace_id: W, guardrail_id: 'g1', at: NOW } }]);
  });

  it('deleting a guardrail leaves every subject it was assigned to, and the organization, without one', () => {
    const state = fold(guardrailsDecider, [
      created('g1'),
      created('g2'),
      assigned('g1', 'key', ['k1']),
      assigned('g2', 'key', ['k2']),
      assigned('g1', 'member', ['u1']),
      { type: 'OrganizationGuardrailSet', data: { workspace_id: W, guardrail_id: 'g1', at: NOW } },
      { type: 'GuardrailDeleted', data: { workspace_id: W, guardrail_id: 'g1', at: NOW } },
    ]);
    expect(state).toEqual({ guardrails: { g2: policy('g2') }, assignments: { key: { k2: 'g2' }, member: {} }, organization: null });
    spec
      .given([created('g1'), { type: 'GuardrailDeleted', data: { workspace_id: W, guardrail_id: 'g1', at: NOW } }])
      .when(assign('g1', 'key', ['k1']))
      .thenThrows('guardrail_not_found');
  });
});
