import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Patch, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { EventMetadata } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import { EdgeResponses } from '../edge/replay';
import { ActorParam, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { bodyValidation } from '@svc/platform';
import { GuardrailsService, KeyRequest, KeysService, RotateKeyRequest, StepUpService } from '@svc/management';
import { presentKeyGuardrail } from '../guardrails/guardrail.presenter';

const CREATE_ROUTE = '/v1/keys';

/** Spec 4.19 (management key only), plus rotation, whose path the spec leaves open. */
@Controller('v1/keys')
@UseGuards(ApiKeyGuard)
@Requires('management')
export class KeysController {
  constructor(
    private readonly keys: KeysService,
    private readonly edge: EdgeResponses,
    private readonly stepUp: StepUpService,
  ) {}

  /**
   * Idempotency-Key as on billed POSTs (spec 3.3, 8), so a client retrying after a timeout does
   * not end up with two keys. The answer holds the secret, so it is kept for replay only sealed.
   * A body refused by validation never gets that far: nothing is claimed or kept for it.
   */
  @Post()
  @HttpCode(201)
  async create(
    @CallerParam() caller: Caller,
    @ActorParam() actor: EventMetadata,
    @Body(bodyValidation({ strict: true })) body: KeyRequest,
    @Headers() headers: Record<string, string | string[] | undefined>,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.edge.serve({ caller, route: CREATE_ROUTE, body, headers, cacheable: false, sealed: true }, reply, async () => {
      // Inside the claim: a replay of a created key needs no second code.
      await this.stepUp.require(caller.accountId, body.scope === 'management' ? 'grant_management' : 'create_key', headers, actor);
      const { record, secret } = await this.keys.create(this.keys.ownerFor(caller), body, actor);
      const [data] = await this.keys.present([record]);
      return { status: 201, headers: {}, json: { data, key: secret } };
    });
  }

  @Get()
  async list(@CallerParam() caller: Caller) {
    return { data: await this.keys.present(await this.keys.list(await this.keys.managerOf(caller))) };
  }

  @Get(':id')
  async get(@CallerParam() caller: Caller, @Param('id') id: string) {
    const [data] = await this.keys.present([await this.keys.get(await this.keys.managerOf(caller), id)]);
    return { data };
  }

  @Patch(':id')
  async update(
    @CallerParam() caller: Caller,
    @ActorParam() actor: EventMetadata,
    @Param('id') id: string,
    @Body(bodyValidation({ strict: true })) body: KeyRequest,
    @Headers() headers: Record<string, string | string[] | undefined>,
  ) {
    if (body.scope === 'management') await this.stepUp.require(caller.accountId, 'grant_management', headers, actor);
    const [data] = await this.keys.present([await this.keys.update(await this.keys.managerOf(caller), id, body, actor)]);
    return { data };
  }

  @Delete(':id')
  async revoke(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string) {
    const [data] = await this.keys.present([await this.keys.revoke(await this.keys.managerOf(caller), id, actor)]);
    return { data };
  }

  /** Replaces the secret; the old one keeps working for `grace_period_seconds` (default 0). */
  @Post(':id/rotate')
  @HttpCode(200)
  async rotate(
    @CallerParam() caller: Caller,
    @ActorParam() actor: EventMetadata,
    @Param('id') id: string,
    @Body(bodyValidation({ strict: true })) body: RotateKeyRequest,
    @Headers() headers: Record<string, string | string[] | undefined>,
  ) {
    await this.stepUp.require(caller.accountId, 'rotate_key', headers, actor);
    const { record, secret } = await this.keys.rotate(await this.keys.managerOf(caller), id, body.grace_period_seconds ?? 0, actor);
    const [data] = await this.keys.present([record]);
    return { data, key: secret };
  }
}

/**
 * Spec 4.20: the calling key's own record, with limits and usage per period, and (issue 44) the
 * guardrails over it, widest first, each with this key's budget window under it.
 */
@Controller('v1/key')
@UseGuards(ApiKeyGuard)
@Requires('lookup')
export class CurrentKeyController {
  constructor(
    private readonly keys: KeysService,
    private readonly guardrails: GuardrailsService,
  ) {}

  @Get()
  async get(@CallerParam() caller: Caller) {
    const [data] = await this.keys.present([caller]);
    return { data: { ...data, guardrails: (await this.guardrails.ofKey(caller)).map(presentKeyGuardrail) } };
  }
}
