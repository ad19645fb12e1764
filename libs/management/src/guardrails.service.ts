import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { AGGREGATE_STORE, AggregateStore, type EventMetadata } from '@svc/eventstore';
import {
  budgetWindow,
  findGuardrail,
  guardrailAssignments,
  guardrailsDecider,
  guardrailsOfKey,
  guardrailsStream,
  keysUnderGuardrail,
  listGuardrails,
  parseGuardrailPolicy,
  type AssignmentScope,
  type GuardrailCommand,
  type GuardrailEvent,
  type GuardrailPolicy,
  type GuardrailRow,
} from '@svc/guardrails';
import { type Caller, listOrgMembers, orgRoleOf } from '@svc/identity';
import { budgetBucket, type BudgetScope } from '@svc/ledger';
import { CLOCK, type Clock, DomainError, type Nano, READ_DB, type SqlRunner } from '@svc/platform';
import { PROJECTIONS, ReadYourWrites, type ProjectionRunner } from '@svc/projections';

/** At most this many ids in one assignment request, so one event and one check stay small. */
export const MAX_ASSIGNMENT_IDS = 500;
const MAX_ID = 200;

/** A budget's window for one subject the guardrail is assigned to, in nano-USD. */
export interface SubjectBudget {
  scope: BudgetScope;
  subject: string;
  limitNano: Nano;
  spentNano: Nano;
  heldNano: Nano;
  /** What is left to hold against: never below 0. */
  remainingNano: Nano;
  windowStart: Date | null;
  resetsAt: Date | null;
}

export interface GuardrailWithBudgets extends GuardrailRow {
  budgets: SubjectBudget[];
}

/** A guardrail that applies to a key, with that key's budget window under it (null without a budget). */
export interface KeyGuardrail {
  guardrailId: string;
  scope: BudgetScope;
  policy: GuardrailPolicy;
  budget: SubjectBudget | null;
}

const FIELD_OF: Record<AssignmentScope, 'key_ids' | 'member_ids'> = { key: 'key_ids', member: 'member_ids' };

/**
 * Guardrails of a workspace (issue 44): named policies assigned to the organization, to members
 * or to keys. Every write is a command on the workspace's one guardrails stream and is read back
 * once projected (and in the audit log). Only the workspace's owner and its organization's admins
 * manage them, with a management key (the controller requires the scope).
 *
 * No email step-up: the step-up list (step-up.service.ts) is of actions that grant access or
 * redirect secrets and money (keys, management scope, webhooks, provider keys). A guardrail only
 * ever narrows what keys may do; the worst a stolen management key does with one is stop the
 * workspace's own keys, which it can already do by revoking them.
 */
@Injectable()
export class GuardrailsService {
  constructor(
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: Pick<ProjectionRunner, 'waitUntilVisible'>,
    @Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore,
    private readonly reads: ReadYourWrites,
  ) {}

  async list(caller: Caller): Promise<GuardrailRow[]> {
    await this.requireManager(caller);
    return listGuardrails(this.sql, caller.workspaceId);
  }

  /** The guardrail, and when it has a budget, each assigned subject's spend in the current window. */
  async get(caller: Caller, guardrailId: string): Promise<GuardrailWithBudgets> {
    await this.requireManager(caller);
    const row = await this.find(caller.workspaceId, guardrailId);
    if (row.policy.limit_nano === null) return { ...row, budgets: [] };
    await this.reads.settle(caller.accountId, 'guardrail_budgets');
    const subjects: { scope: BudgetScope; subject: string }[] = [];
    for (const scope of ['organization', 'member', 'key'] as const)
      for (const a of await guardrailAssignments(this.sql, guardrailId, scope)) subjects.push({ scope, subject: a.subject });
    const now = this.clock.now();
    const budgets: SubjectBudget[] = [];
    for (const s of subjects) budgets.push(await this.budget(guardrailId, row.policy, s.scope, s.subject, now));
    return { ...row, budgets };
  }

  async create(caller: Caller, body: unknown, metadata: EventMetadata): Promise<GuardrailRow> {
    await this.requireManager(caller);
    const policy = parseGuardrailPolicy(body);
    const guardrailId = `gr_${randomUUID().replaceAll('-', '')}`;
    await this.execute({ type: 'CreateGuardrail', workspaceId: caller.workspaceId, guardrailId, policy }, metadata);
    return this.find(caller.workspaceId, guardrailId);
  }

  /** PATCH: the fields sent change, the others keep their value. */
  async update(caller: Caller, guardrailId: string, body: unknown, metadata: EventMetadata): Promise<GuardrailRow> {
    await this.requireManager(caller);
    const current = await this.find(caller.workspaceId, guardrailId);
    const policy = parseGuardrailPolicy(body, current.policy);
    await this.execute({ type: 'UpdateGuardrail', workspaceId: caller.workspaceId, guardrailId, policy }, metadata);
    return this.find(caller.workspaceId, guardrailId);
  }

  async delete(caller: Caller, guardrailId: string, metadata: EventMetadata): Promise<void> {
    await this.requireManager(caller);
    await this.execute({ type: 'DeleteGuardrail', workspaceId: caller.workspaceId, guardrailId }, metadata);
  }

  /** How many of the subjects were newly assigned: those already on it count 0; one on another guardrail moves here. */
  async assign(caller: Caller, guardrailId: string, scope: AssignmentScope, body: unknown, metadata: EventMetadata): Promise<number> {
    await this.requireManager(caller);
    await this.find(caller.workspaceId, guardrailId);
    const subjects = parseSubjects(body, FIELD_OF[scope]);
    await this.checkSubjects(caller, guardrailId, scope, subjects, false);
    const events = await this.execute({ type: 'AssignGuardrail', workspaceId: caller.workspaceId, guardrailId, scope, subjects }, metadata);
    return subjectsOf(events);
  }

  /** How many of the subjects were on this guardrail and now are not; others are left as they are. */
  async unassign(caller: Caller, guardrailId: string, scope: AssignmentScope, body: unknown, metadata: EventMetadata): Promise<number> {
    await this.requireManager(caller);
    await this.find(caller.workspaceId, guardrailId);
    const subjects = parseSubjects(body, FIELD_OF[scope]);
    await this.checkSubjects(caller, guardrailId, scope, subjects, true);
    const events = await this.execute({ type: 'UnassignGuardrail', workspaceId: caller.workspaceId, guardrailId, scope, subjects }, metadata);
    return subjectsOf(events);
  }

  async assignments(caller: Caller, guardrailId: string, scope: AssignmentScope): Promise<{ subject: string; assigned_at: Date }[]> {
    await this.requireManager(caller);
    await this.find(caller.workspaceId, guardrailId);
    return guardrailAssignments(this.sql, guardrailId, scope);
  }

  /** Makes it the workspace-wide guardrail (replacing the one there was): 1 if that changed, else 0. */
  async setOrganization(caller: Caller, guardrailId: string, metadata: EventMetadata): Promise<number> {
    await this.requireManager(caller);
    const events = await this.execute({ type: 'SetOrganizationGuardrail', workspaceId: caller.workspaceId, guardrailId }, metadata);
    return events.length;
  }

  async removeOrganization(caller: Caller, guardrailId: string, metadata: EventMetadata): Promise<number> {
    await this.requireManager(caller);
    const events = await this.execute({ type: 'RemoveOrganizationGuardrail', workspaceId: caller.workspaceId, guardrailId }, metadata);
    return events.length;
  }

  /** The keys a guardrail applies to now (null: every key of the workspace), for activity by guardrail. */
  async keysUnder(caller: Caller, guardrailId: string): Promise<string[] | null> {
    await this.requireManager(caller);
    await this.find(caller.workspaceId, guardrailId, 'guardrail_id');
    return keysUnderGuardrail(this.sql, caller.workspaceId, guardrailId);
  }

  /** The guardrails that apply to the calling key (GET /v1/key), any key may read its own. */
  async ofKey(caller: Caller): Promise<KeyGuardrail[]> {
    const memberId = caller.orgId === null ? null : caller.createdBy;
    const rows = await guardrailsOfKey(this.sql, { workspaceId: caller.workspaceId, keyId: caller.keyId, memberId });
    if (rows.some((r) => r.policy.limit_nano !== null)) await this.reads.settle(caller.accountId, 'guardrail_budgets');
    const now = this.clock.now();
    const applied: KeyGuardrail[] = [];
    for (const r of rows) {
      const budget = r.policy.limit_nano === null ? null : await this.budget(r.guardrail_id, r.policy, r.scope, r.subject, now);
      applied.push({ guardrailId: r.guardrail_id, scope: r.scope, policy: r.policy, budget });
    }
    return applied;
  }

  private async budget(guardrailId: string, policy: GuardrailPolicy, scope: BudgetScope, subject: string, now: Date): Promise<SubjectBudget> {
    const limitNano = BigInt(policy.limit_nano!);
    const w = await budgetWindow(this.sql, budgetBucket(guardrailId, scope, subject), policy.reset_interval, now);
    const left = limitNano - w.spent_nano - w.held_nano;
    return {
      scope,
      subject,
      limitNano,
      spentNano: w.spent_nano,
      heldNano: w.held_nano,
      remainingNano: left > 0n ? left : 0n,
      windowStart: w.window_start,
      resetsAt: w.resets_at,
    };
  }

  /**
   * The workspace's owner (the account itself, for its own workspace) and its organization's
   * admins; a member's management key manages its own keys, not the rules over everyone's.
   */
  private async requireManager(caller: Caller): Promise<void> {
    if (caller.orgId === null) return;
    const role = await orgRoleOf(this.sql, caller.orgId, caller.createdBy);
    if (role === 'owner' || role === 'admin') return;
    throw DomainError.forbidden(
      `Only the organization's owner and admins manage its guardrails; this key's account is ${role === null ? 'not part' : `a ${role}`} of ${caller.orgId}.`,
      'org_role_required',
    );
  }

  /** Another workspace's guardrail is as unknown as a missing one. */
  private async find(workspaceId: string, guardrailId: string, param = 'id'): Promise<GuardrailRow> {
    const row = await findGuardrail(this.sql, workspaceId, guardrailId);
    if (!row) throw guardrailNotFound(guardrailId, param);
    return row;
  }

  /**
   * Keys of this workspace, members of its organization (its owner included); the first that is
   * not is refused by its index, before anything is written. Removing also takes a subject that is
   * on this guardrail still (a member who has left, a key since deleted), so it can be cleaned up.
   */
  private async checkSubjects(caller: Caller, guardrailId: string, scope: AssignmentScope, subjects: string[], removing: boolean): Promise<void> {
    const valid = new Set<string>();
    if (scope === 'key') {
      const { rows } = await this.sql.query<{ key_id: string }>(`SELECT key_id FROM api_keys WHERE workspace_id = $1 AND key_id = ANY($2::text[])`, [
        caller.workspaceId,
        subjects,
      ]);
      for (const r of rows) valid.add(r.key_id);
    } else if (caller.orgId !== null) {
      for (const m of await listOrgMembers(this.sql, caller.orgId)) valid.add(m.accountId);
    }
    if (removing) for (const a of await guardrailAssignments(this.sql, guardrailId, scope)) valid.add(a.subject);
    const bad = subjects.findIndex((s) => !valid.has(s));
    if (bad === -1) return;
    const field = FIELD_OF[scope];
    const what =
      scope === 'key'
        ? `No key '${subjects[bad]}' in this workspace.`
        : caller.orgId === null
          ? 'This workspace is an account of its own, not an organization: it has no members to assign (assign its keys).'
          : `'${subjects[bad]}' is not a member of ${caller.orgId}.`;
    throw DomainError.invalid(what, `${field}[${bad}]`, scope === 'key' ? 'key_not_found' : 'member_not_found');
  }

  private async execute(command: GuardrailCommand, metadata: EventMetadata): Promise<GuardrailEvent[]> {
    const handled = await this.aggregates.handle(guardrailsDecider, guardrailsStream(command.workspaceId), command, metadata).catch((err: unknown) => {
      if (err instanceof DomainError && err.code === 'guardrail_not_found') throw guardrailNotFound(command.guardrailId, 'id');
      throw err;
    });
    if (handled.appended) await this.projections.waitUntilVisible(handled.appended.position, ['guardrails', 'audit_log']);
    return handled.events;
  }
}

export function guardrailNotFound(guardrailId: string, param: string): DomainError {
  return DomainError.notFound(`No guardrail '${guardrailId}' in this workspace.`, 'guardrail_not_found', param);
}

function subjectsOf(events: GuardrailEvent[]): number {
  const e = events[0];
  return e && (e.type === 'GuardrailAssigned' || e.type === 'GuardrailUnassigned') ? e.data.subjects.length : 0;
}

/** `{key_ids: [...]}` or `{member_ids: [...]}`: 1 to 500 non-empty ids; a refusal names the field or the entry. */
export function parseSubjects(body: unknown, field: 'key_ids' | 'member_ids'): string[] {
  const invalid = (param: string, message: string) => DomainError.invalid(message, param, 'invalid_assignment');
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid(field, `The body is a JSON object with ${field}.`);
  const fields = body as Record<string, unknown>;
  const other = Object.keys(fields).find((k) => k !== field);
  if (other !== undefined) throw invalid(other, `An assignment takes only ${field}.`);
  const ids = fields[field];
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_ASSIGNMENT_IDS) {
    throw invalid(field, `${field} is an array of 1 to ${MAX_ASSIGNMENT_IDS} ids.`);
  }
  ids.forEach((id, i) => {
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID) throw invalid(`${field}[${i}]`, `${field}[${i}] is a non-empty id.`);
  });
  // Repeats are kept: a refusal's index is the one the caller sent; the decider counts each subject once.
  return ids as string[];
}
