import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, UseGuards } from '@nestjs/common';
import type { EventMetadata } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import { PresetsService, type PresetWithVersions } from '@svc/management';
import { ApiError } from '@svc/platform';
import { parsePresetRequest } from '@svc/presets';
import type { PresetRow } from '@svc/presets';
import { ActorParam, ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';

function present(preset: PresetRow) {
  return {
    slug: preset.slug,
    name: preset.name,
    description: preset.description,
    version: preset.version,
    config: preset.config,
    created_at: preset.createdAt,
    updated_at: preset.updatedAt,
  };
}

function presentWithVersions(preset: PresetWithVersions) {
  return {
    ...present(preset),
    versions: preset.versions.map((v) => ({
      version: v.version,
      config: v.config,
      rolled_back_to: v.rolledBackTo,
      created_at: v.createdAt,
      created_by: v.createdBy,
    })),
  };
}

/** Spec 4.18: the workspace's presets; any key reads them, a management key changes them (spec 5.3). */
@Controller('v1/presets')
@UseGuards(ApiKeyGuard)
@Requires('lookup')
export class PresetsController {
  constructor(private readonly presets: PresetsService) {}

  @Get()
  async list(@CallerParam() caller: Caller) {
    return { data: (await this.presets.list(caller.workspaceId)).map(present) };
  }

  @Get(':slug')
  async get(@CallerParam() caller: Caller, @Param('slug') slug: string) {
    return { data: presentWithVersions(await this.presets.get(caller.workspaceId, slug)) };
  }

  @Post()
  @HttpCode(201)
  @Requires('management')
  async create(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Body() body: unknown) {
    const request = parsePresetRequest(body, this.presets.catalogModels);
    return { data: presentWithVersions(await this.presets.create(caller.workspaceId, request, actor)) };
  }

  @Patch(':slug')
  @Requires('management')
  async update(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('slug') slug: string, @Body() body: unknown) {
    const request = parsePresetRequest(body, this.presets.catalogModels, slug);
    return { data: presentWithVersions(await this.presets.update(caller.workspaceId, request, actor)) };
  }

  /** A past version's config becomes the latest again, as a new version (spec 2.5: versions can be rolled back). */
  @Post(':slug/rollback')
  @HttpCode(200)
  @Requires('management')
  async rollback(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('slug') slug: string, @Body() body: unknown) {
    const version = (body as { version?: unknown } | null)?.version;
    if (typeof version !== 'number' || !Number.isInteger(version) || version < 1)
      throw ApiError.invalidRequest("'version' must be a version number (from 1).", 'version');
    return { data: presentWithVersions(await this.presets.rollback(caller.workspaceId, slug, version, actor)) };
  }

  @Delete(':slug')
  @Requires('management')
  async delete(@CallerParam() caller: Caller, @ActorParam() actor: EventMetadata, @Param('slug') slug: string) {
    await this.presets.delete(caller.workspaceId, slug, actor);
    return { slug, deleted: true };
  }
}
