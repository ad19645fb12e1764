import { Controller, Delete, Get, Param, Query as QueryParam, UseGuards } from '@nestjs/common';
import type { Caller } from '@svc/identity';
import { SettingsService } from '@svc/management';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { listPage, pageQuery } from '../http/pagination';
import { settingsAccount } from './settings.controller';

const summary = (log: { generationId: string; keyId: string; endpoint: string; createdAt: string; expiresAt: string }) => ({
  generation_id: log.generationId,
  key_id: log.keyId,
  endpoint: log.endpoint,
  created_at: log.createdAt,
  expires_at: log.expiresAt,
});

/**
 * Spec 1: the prompts and responses kept while prompt logging is on, read and purged with a
 * management key of the account (the same rule as its settings).
 */
@Controller('v1/prompt-logs')
@UseGuards(ApiKeyGuard)
@Requires('management')
export class PromptLogsController {
  constructor(private readonly settings: SettingsService) {}

  @Get()
  async list(@CallerParam() caller: Caller, @QueryParam('limit') limit: unknown, @QueryParam('after') after: unknown) {
    const page = pageQuery(limit, after, { max: 100, fallback: 20, isId: (v) => v.length > 0 && v.length <= 255, what: 'a generation id' });
    const rows = await this.settings.promptLogs(settingsAccount(caller), page.fetch, page.after);
    return listPage(rows, page.limit, (r) => r.generationId, summary);
  }

  @Get(':generationId')
  async get(@CallerParam() caller: Caller, @Param('generationId') generationId: string) {
    const log = await this.settings.promptLog(settingsAccount(caller), generationId);
    return { data: { ...summary(log), request: log.request, response: log.response } };
  }

  /** Purge all: deleted for good at once, not left to the sweeper. */
  @Delete()
  async purgeAll(@CallerParam() caller: Caller) {
    return { deleted: await this.settings.purgePromptLogs(settingsAccount(caller), null) };
  }

  @Delete(':generationId')
  async purgeOne(@CallerParam() caller: Caller, @Param('generationId') generationId: string) {
    await this.settings.purgePromptLogs(settingsAccount(caller), generationId);
    return { deleted: 1, generation_id: generationId };
  }
}
