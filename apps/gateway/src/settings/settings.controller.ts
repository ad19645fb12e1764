import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Patch, Post, Put, Query as QueryParam, Req, UseGuards } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { EventMetadata } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import {
  parseSettingsPatch,
  parseStepUpCodeRequest,
  parseWebhookRequest,
  presentSettings,
  presentWebhook,
  presentWebhookEvent,
  SettingsService,
  StepUpService,
} from '@svc/management';
import { RateLimitService } from '../edge/rate-limits';
import { ActorParam, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { ownAccountOf } from '../http/own-account';
import { listPage, pageQuery } from '../http/pagination';

/** Settings belong to the account that pays (spec 1). */
export const settingsAccount = (caller: Caller) => ownAccountOf(caller, 'settings are managed');

/** Account settings (spec 1, 6.1): prompt logging, email step-up and the webhook endpoint. */
@Controller('v1/settings')
@UseGuards(ApiKeyGuard)
@Requires('management')
export class SettingsController {
  constructor(
    private readonly settings: SettingsService,
    private readonly stepUp: StepUpService,
  ) {}

  @Get()
  async get(@CallerParam() caller: Caller) {
    return { data: presentSettings(await this.settings.get(settingsAccount(caller))) };
  }

  /** Changing step-up while it is on needs a code too: otherwise a leaked management key turns it off first. */
  @Patch()
  async update(
    @CallerParam() caller: Caller,
    @ActorParam() actor: EventMetadata,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
  ) {
    const patch = parseSettingsPatch(body);
    const account = settingsAccount(caller);
    if (patch.stepUp) await this.stepUp.require(account, 'change_step_up', headers, actor);
    return { data: presentSettings(await this.settings.update(account, patch, actor)) };
  }

  /** The signing secret is in the answer only when the endpoint is new: shown once, as Stripe's. */
  @Put('webhook')
  async saveWebhook(
    @CallerParam() caller: Caller,
    @ActorParam() actor: EventMetadata,
    @Body() body: unknown,
    @Headers() headers: Record<string, string | string[] | undefined>,
  ) {
    const request = parseWebhookRequest(body);
    const account = settingsAccount(caller);
    const { webhook, secret } = await this.settings.saveWebhook(account, request, actor, () => this.stepUp.require(account, 'save_webhook', headers, actor));
    return { data: presentWebhook(webhook!), ...(secret !== null && { secret }) };
  }

  @Delete('webhook')
  async deleteWebhook(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata) {
    await this.settings.deleteWebhook(settingsAccount(caller), actor);
    return { deleted: true };
  }

  @Post('webhook/rotate-secret')
  @HttpCode(200)
  async rotateSecret(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata) {
    const { webhook, secret } = await this.settings.rotateWebhookSecret(settingsAccount(caller), actor);
    return { data: presentWebhook(webhook!), secret };
  }

  @Post('webhook/resume')
  @HttpCode(200)
  async resume(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata) {
    return { data: presentWebhook((await this.settings.resumeWebhook(settingsAccount(caller), actor))!) };
  }
}

/** Spec 1: a code for one sensitive action, mailed to the account's step-up address. */
@Controller('v1/step-up')
@UseGuards(ApiKeyGuard)
@Requires('management')
export class StepUpController {
  constructor(
    private readonly stepUp: StepUpService,
    private readonly rateLimits: RateLimitService,
  ) {}

  @Post('codes')
  @HttpCode(201)
  async sendCode(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Body() body: unknown, @Req() request: FastifyRequest) {
    const action = parseStepUpCodeRequest(body);
    await this.rateLimits.stepUpCodeRequest(request.ip);
    return { data: await this.stepUp.sendCode(settingsAccount(caller), action, actor) };
  }
}

/** Spec 6.1: every event sent to the endpoint, with its delivery state and attempts; redelivery. */
@Controller('v1/webhook-events')
@UseGuards(ApiKeyGuard)
@Requires('management')
export class WebhookEventsController {
  constructor(private readonly settings: SettingsService) {}

  /** A cursor list, newest first, in OpenAI's list shape (`after` is the last id of the page before). */
  @Get()
  async list(@CallerParam() caller: Caller, @QueryParam('limit') limit: unknown, @QueryParam('after') after: unknown) {
    const page = pageQuery(limit, after, { max: 100, fallback: 20, isId: (v) => /^evt_[0-9a-f]{24}$/.test(v), what: 'a webhook event id' });
    const rows = await this.settings.listEvents(settingsAccount(caller), page.fetch, page.after);
    return listPage(
      rows,
      page.limit,
      (e) => e.id,
      (e) => presentWebhookEvent(e),
    );
  }

  @Get(':id')
  async get(@CallerParam() caller: Caller, @Param('id') id: string) {
    const { event, attempts } = await this.settings.event(settingsAccount(caller), id);
    return { data: presentWebhookEvent(event, attempts) };
  }

  @Post(':id/redeliver')
  @HttpCode(202)
  async redeliver(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('id') id: string) {
    const { event, attempts } = await this.settings.redeliver(settingsAccount(caller), id, actor);
    return { data: presentWebhookEvent(event, attempts) };
  }
}
