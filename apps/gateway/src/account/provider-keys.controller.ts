import { Body, Controller, Delete, Get, Headers, Param, Put, UseGuards } from '@nestjs/common';
import type { EventMetadata } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import { AdminService, StepUpService } from '@svc/management';
import { bodyValidation } from '@svc/platform';
import { ProviderKeyRequest } from '../admin/admin.request';
import { ActorParam, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { ownAccountOf } from '../http/own-account';

/** Provider keys are the paying account's: its balance is what a BYOK request spares. */
const providerKeysAccount = (caller: Caller) => ownAccountOf(caller, 'provider keys are managed');

/**
 * Spec 1, bring-your-own-key, for the account itself (the operator's twin is under /admin):
 * saving is a sensitive action (email step-up), and the answer shows a hint, never the key.
 */
@Controller('v1/provider-keys')
@UseGuards(ApiKeyGuard)
@Requires('management')
export class ProviderKeysController {
  constructor(
    private readonly admin: AdminService,
    private readonly stepUp: StepUpService,
  ) {}

  /** `providers`: those of the catalog a key can be saved for. */
  @Get()
  async list(@CallerParam() caller: Caller) {
    const keys = await this.admin.providerKeys(providerKeysAccount(caller));
    return { data: keys.map((k) => ({ provider: k.provider, hint: k.hint, saved_at: k.savedAt })), providers: this.admin.providerNames() };
  }

  @Put(':provider')
  async save(
    @CallerParam() caller: Caller,
    @ActorParam() actor: EventMetadata,
    @Param('provider') provider: string,
    @Body(bodyValidation({ strict: true })) body: ProviderKeyRequest,
    @Headers() headers: Record<string, string | string[] | undefined>,
  ) {
    const account = providerKeysAccount(caller);
    return {
      data: await this.admin.saveProviderKey(account, provider, body.api_key, actor, () => this.stepUp.require(account, 'save_provider_key', headers, actor)),
    };
  }

  @Delete(':provider')
  async delete(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('provider') provider: string) {
    await this.admin.deleteProviderKey(providerKeysAccount(caller), provider, actor);
    return { data: { provider, deleted: true } };
  }
}
