import { Controller, Delete, Get, Param, Query as QueryParam, UseGuards } from '@nestjs/common';
import type { Caller } from '@svc/identity';
import { SettingsService } from '@svc/management';
import { ApiError } from '@svc/platform';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { settingsAccount } from './settings.controller';

const MAX_PAGE = 100;

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
    const n = limit === undefined ? 20 : Number(limit);
    if (!Number.isInteger(n) || n < 1 || n > MAX_PAGE) throw ApiError.invalidRequest(`limit must be an integer from 1 to ${MAX_PAGE}.`, 'limit');
    if (after !== undefined && (typeof after !== 'string' || after.length === 0 || after.length > 255)) throw ApiError.invalidRequest('after must be a generation id.', 'after');
    const rows = await this.settings.promptLogs(settingsAccount(caller), n + 1, (after as string | undefined) ?? null);
    const page = rows.slice(0, n);
    return { object: 'list', data: page.map(summary), first_id: page[0]?.generationId ?? null, last_id: page.at(-1)?.generationId ?? null, has_more: rows.length > n };
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
