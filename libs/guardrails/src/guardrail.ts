/**
 * Guardrails (issue 44): a workspace's named policies — a budget, which models and providers may
 * serve, zero-data-retention, content filters — each assigned to the organization (workspace-wide,
 * one at a time), to members (across their keys) or to keys (a key or member holds at most one:
 * assigning replaces). All of a workspace's guardrails and assignments are one stream,
 * `guardrails-<workspace>`, so "at most one" is decided in one place.
 */
import { DomainError, type Decider, type DomainEvent } from '@svc/eventstore';
import type { BuiltinSlug } from './content/builtins';
import type { ContentAction } from './content/policy';

export const guardrailsStream = (workspaceId: string) => `guardrails-${workspaceId}`;

export type BudgetReset = 'daily' | 'weekly' | 'monthly' | 'never';

/** What a guardrail says, as the API names it (spec-style snake case, money in nano-USD strings). */
export interface GuardrailPolicy {
  name: string;
  description: string | null;
  /** null: no budget. */
  limit_nano: string | null;
  reset_interval: BudgetReset;
  include_byok_in_budgets: boolean;
  allowed_models: string[] | null;
  ignored_models: string[];
  allowed_providers: string[] | null;
  ignored_providers: string[];
  enforce_zdr: boolean;
  /** `deny`: only endpoints the catalog marks as not collecting data (as the request's own `provider.data_collection`). */
  data_collection: 'allow' | 'deny';
  content_filter_builtins: { slug: BuiltinSlug; action: ContentAction; label?: string }[];
  content_filters: { pattern: string; action: ContentAction; label?: string }[];
}

export type AssignmentScope = 'key' | 'member';

type Ids = { workspace_id: string; guardrail_id: string };

export type GuardrailEvent =
  | DomainEvent<'GuardrailCreated', Ids & { policy: GuardrailPolicy; at: string }>
  | DomainEvent<'GuardrailUpdated', Ids & { policy: GuardrailPolicy; at: string }>
  | DomainEvent<'GuardrailDeleted', Ids & { at: string }>
  /** `subjects` are key ids or member (account) ids; each leaves the guardrail it had, if any. */
  | DomainEvent<'GuardrailAssigned', Ids & { scope: AssignmentScope; subjects: string[]; at: string }>
  | DomainEvent<'GuardrailUnassigned', Ids & { scope: AssignmentScope; subjects: string[]; at: string }>
  | DomainEvent<'OrganizationGuardrailSet', Ids & { at: string }>
  | DomainEvent<'OrganizationGuardrailRemoved', Ids & { at: string }>;

export type GuardrailCommand =
  | { type: 'CreateGuardrail'; workspaceId: string; guardrailId: string; policy: GuardrailPolicy }
  | { type: 'UpdateGuardrail'; workspaceId: string; guardrailId: string; policy: GuardrailPolicy }
  | { type: 'DeleteGuardrail'; workspaceId: string; guardrailId: string }
  | { type: 'AssignGuardrail'; workspaceId: string; guardrailId: string; scope: AssignmentScope; subjects: string[] }
  | { type: 'UnassignGuardrail'; workspaceId: string; guardrailId: string; scope: AssignmentScope; subjects: string[] }
  | { type: 'SetOrganizationGuardrail'; workspaceId: string; guardrailId: string }
  | { type: 'RemoveOrganizationGuardrail'; workspaceId: string; guardrailId: string };

export interface GuardrailsState {
  guardrails: Readonly<Record<string, GuardrailPolicy>>;
  /** Per scope: subject -> guardrail id. */
  assignments: Readonly<Record<AssignmentScope, Readonly<Record<string, string>>>>;
  organization: string | null;
}

/** A workspace holds at most this many guardrails, so its one stream and state stay small. */
export const MAX_GUARDRAILS = 100;

function requireGuardrail(state: GuardrailsState, id: string): GuardrailPolicy {
  const policy = state.guardrails[id];
  if (!policy) throw DomainError.notFound(`No guardrail ${id} in this workspace.`, 'guardrail_not_found');
  return policy;
}

const at = (now: Date) => now.toISOString();

function create(command: Extract<GuardrailCommand, { type: 'CreateGuardrail' }>, state: GuardrailsState, now: Date): GuardrailEvent[] {
  if (state.guardrails[command.guardrailId]) throw new DomainError('guardrail_exists', `Guardrail ${command.guardrailId} already exists.`, {}, 'conflict');
  if (Object.keys(state.guardrails).length >= MAX_GUARDRAILS) {
    throw new DomainError('guardrail_limit_reached', `A workspace has at most ${MAX_GUARDRAILS} guardrails; delete one first.`, {}, 'conflict');
  }
  const ids = { workspace_id: command.workspaceId, guardrail_id: command.guardrailId };
  return [{ type: 'GuardrailCreated', data: { ...ids, policy: command.policy, at: at(now) } }];
}

function update(command: Extract<GuardrailCommand, { type: 'UpdateGuardrail' }>, state: GuardrailsState, now: Date): GuardrailEvent[] {
  const current = requireGuardrail(state, command.guardrailId);
  if (JSON.stringify(current) === JSON.stringify(command.policy)) return [];
  return [{ type: 'GuardrailUpdated', data: { workspace_id: command.workspaceId, guardrail_id: command.guardrailId, policy: command.policy, at: at(now) } }];
}

function remove(command: Extract<GuardrailCommand, { type: 'DeleteGuardrail' }>, state: GuardrailsState, now: Date): GuardrailEvent[] {
  requireGuardrail(state, command.guardrailId);
  return [{ type: 'GuardrailDeleted', data: { workspace_id: command.workspaceId, guardrail_id: command.guardrailId, at: at(now) } }];
}

/** Subjects not yet on this guardrail: assigning what is already assigned records nothing. */
function assign(command: Extract<GuardrailCommand, { type: 'AssignGuardrail' }>, state: GuardrailsState, now: Date): GuardrailEvent[] {
  requireGuardrail(state, command.guardrailId);
  const current = state.assignments[command.scope];
  const subjects = [...new Set(command.subjects)].filter((s) => current[s] !== command.guardrailId);
  if (subjects.length === 0) return [];
  const data = { workspace_id: command.workspaceId, guardrail_id: command.guardrailId, scope: command.scope, subjects, at: at(now) };
  return [{ type: 'GuardrailAssigned', data }];
}

/** Subjects on this guardrail; others are left as they are. */
function unassign(command: Extract<GuardrailCommand, { type: 'UnassignGuardrail' }>, state: GuardrailsState, now: Date): GuardrailEvent[] {
  requireGuardrail(state, command.guardrailId);
  const current = state.assignments[command.scope];
  const subjects = [...new Set(command.subjects)].filter((s) => current[s] === command.guardrailId);
  if (subjects.length === 0) return [];
  const data = { workspace_id: command.workspaceId, guardrail_id: command.guardrailId, scope: command.scope, subjects, at: at(now) };
  return [{ type: 'GuardrailUnassigned', data }];
}

function setOrganization(command: Extract<GuardrailCommand, { type: 'SetOrganizationGuardrail' }>, state: GuardrailsState, now: Date): GuardrailEvent[] {
  requireGuardrail(state, command.guardrailId);
  if (state.organization === command.guardrailId) return [];
  return [{ type: 'OrganizationGuardrailSet', data: { workspace_id: command.workspaceId, guardrail_id: command.guardrailId, at: at(now) } }];
}

function removeOrganization(command: Extract<GuardrailCommand, { type: 'RemoveOrganizationGuardrail' }>, state: GuardrailsState, now: Date): GuardrailEvent[] {
  requireGuardrail(state, command.guardrailId);
  if (state.organization !== command.guardrailId) return [];
  return [{ type: 'OrganizationGuardrailRemoved', data: { workspace_id: command.workspaceId, guardrail_id: command.guardrailId, at: at(now) } }];
}

function decide(command: GuardrailCommand, state: GuardrailsState, now: Date): GuardrailEvent[] {
  switch (command.type) {
    case 'CreateGuardrail':
      return create(command, state, now);
    case 'UpdateGuardrail':
      return update(command, state, now);
    case 'DeleteGuardrail':
      return remove(command, state, now);
    case 'AssignGuardrail':
      return assign(command, state, now);
    case 'UnassignGuardrail':
      return unassign(command, state, now);
    case 'SetOrganizationGuardrail':
      return setOrganization(command, state, now);
    case 'RemoveOrganizationGuardrail':
      return removeOrganization(command, state, now);
  }
}

const without = (record: Readonly<Record<string, string>>, drop: (subject: string, guardrail: string) => boolean) =>
  Object.fromEntries(Object.entries(record).filter(([subject, guardrail]) => !drop(subject, guardrail)));

function evolve(state: GuardrailsState, event: GuardrailEvent): GuardrailsState {
  switch (event.type) {
    case 'GuardrailCreated':
    case 'GuardrailUpdated':
      return { ...state, guardrails: { ...state.guardrails, [event.data.guardrail_id]: event.data.policy } };
    case 'GuardrailDeleted': {
      const id = event.data.guardrail_id;
      const { [id]: _deleted, ...guardrails } = state.guardrails;
      // A deleted guardrail leaves every subject it was assigned to without one.
      return {
        guardrails,
        assignments: { key: without(state.assignments.key, (_, g) => g === id), member: without(state.assignments.member, (_, g) => g === id) },
        organization: state.organization === id ? null : state.organization,
      };
    }
    case 'GuardrailAssigned': {
      const { scope, subjects, guardrail_id } = event.data;
      const assigned = { ...state.assignments[scope] };
      for (const subject of subjects) assigned[subject] = guardrail_id;
      return { ...state, assignments: { ...state.assignments, [scope]: assigned } };
    }
    case 'GuardrailUnassigned': {
      const { scope, subjects } = event.data;
      const gone = new Set(subjects);
      return { ...state, assignments: { ...state.assignments, [scope]: without(state.assignments[scope], (s) => gone.has(s)) } };
    }
    case 'OrganizationGuardrailSet':
      return { ...state, organization: event.data.guardrail_id };
    case 'OrganizationGuardrailRemoved':
      return { ...state, organization: null };
  }
}

export const guardrailsDecider: Decider<GuardrailCommand, GuardrailsState, GuardrailEvent> = {
  initialState: () => ({ guardrails: {}, assignments: { key: {}, member: {} }, organization: null }),
  decide,
  evolve,
};
