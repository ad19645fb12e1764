import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, UseGuards } from '@nestjs/common';
import type { EventMetadata } from '@svc/eventstore';
import type { AssignmentScope } from '@svc/guardrails';
import type { Caller } from '@svc/identity';
import { GuardrailsService } from '@svc/management';
import { ActorParam, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { presentBudget, presentGuardrail } from './guardrail.presenter';

const SUBJECT_FIELD: Record<AssignmentScope, string> = { key: 'key_id', member: 'member_id' };

/**
 * Issue 44: the workspace's guardrails, shaped like OpenRouter's API so its clients port over.
 * A management key of the workspace's owner or an organization admin (spec 5.3); the body is
 * checked field by field by the use case, a refusal naming the field.
 */
@Controller('v1/guardrails')
@UseGuards(ApiKeyGuard)
@Requires('management')
export class GuardrailsController {
  constructor(private readonly guardrails: GuardrailsService) {}

  @Get()
  async list(@CallerParam() caller: Caller) {
    return { data: (await this.guardrails.list(caller)).map(presentGuardrail) };
  }

  @Post()
  @HttpCode(201)
  async create(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Body() body: unknown) {
    return { data: presentGuardrail(await this.guardrails.create(caller, body, actor)) };
  }

  @Get(':id')
  async get(@CallerParam() caller: Caller, @Param('id') id: string) {
    const guardrail = await this.guardrails.get(caller, id);
    return { data: { ...presentGuardrail(guardrail), budgets: guardrail.budgets.map(presentBudget) } };
  }

  @Patch(':id')
  async update(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string, @Body() body: unknown) {
    return { data: presentGuardrail(await this.guardrails.update(caller, id, body, actor)) };
  }

  @Delete(':id')
  async delete(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string) {
    await this.guardrails.delete(caller, id, actor);
    return { id, deleted: true };
  }

  @Get(':id/assignments/keys')
  async keyAssignments(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.listAssignments(caller, id, 'key');
  }

  @Post(':id/assignments/keys')
  @HttpCode(200)
  async assignKeys(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string, @Body() body: unknown) {
    return { assigned_count: await this.guardrails.assign(caller, id, 'key', body, actor) };
  }

  @Post(':id/assignments/keys/remove')
  @HttpCode(200)
  async unassignKeys(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string, @Body() body: unknown) {
    return { unassigned_count: await this.guardrails.unassign(caller, id, 'key', body, actor) };
  }

  @Get(':id/assignments/members')
  async memberAssignments(@CallerParam() caller: Caller, @Param('id') id: string) {
    return this.listAssignments(caller, id, 'member');
  }

  @Post(':id/assignments/members')
  @HttpCode(200)
  async assignMembers(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string, @Body() body: unknown) {
    return { assigned_count: await this.guardrails.assign(caller, id, 'member', body, actor) };
  }

  @Post(':id/assignments/members/remove')
  @HttpCode(200)
  async unassignMembers(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string, @Body() body: unknown) {
    return { unassigned_count: await this.guardrails.unassign(caller, id, 'member', body, actor) };
  }

  /** The workspace-wide guardrail: one at a time, so setting this one replaces the one there was. */
  @Post(':id/assignments/organization')
  @HttpCode(200)
  async assignOrganization(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string) {
    return { assigned_count: await this.guardrails.setOrganization(caller, id, actor) };
  }

  @Post(':id/assignments/organization/remove')
  @HttpCode(200)
  async unassignOrganization(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string) {
    return { unassigned_count: await this.guardrails.removeOrganization(caller, id, actor) };
  }

  private async listAssignments(caller: Caller, id: string, scope: AssignmentScope) {
    const rows = await this.guardrails.assignments(caller, id, scope);
    return { data: rows.map((r) => ({ [SUBJECT_FIELD[scope]]: r.subject, guardrail_id: id, assigned_at: new Date(r.assigned_at).toISOString() })) };
  }
}
