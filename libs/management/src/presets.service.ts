import { Inject, Injectable } from '@nestjs/common';
import { CATALOG, type Catalog } from '@svc/catalog';
import { AGGREGATE_STORE, AggregateStore, DomainError, type EventMetadata } from '@svc/eventstore';
import { CONFIG, READ_DB, type Config, type SqlRunner } from '@svc/platform';
import {
  openPresetConfig,
  presetDecider,
  presetStream,
  sealPresetConfig,
  type PresetCommand,
  type PresetRequest,
  getPreset,
  listPresets,
  type PresetRow,
  type PresetVersionRow,
} from '@svc/presets';
import { PROJECTIONS, type ProjectionRunner } from '@svc/projections';

export type PresetWithVersions = PresetRow & { versions: PresetVersionRow[] };

/** Presets of a workspace (spec 4.18): each write a command on its stream, read back once projected. */
@Injectable()
export class PresetsService {
  constructor(
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CATALOG) private readonly catalog: Pick<Catalog, 'get'>,
    @Inject(PROJECTIONS) private readonly projections: Pick<ProjectionRunner, 'waitUntilVisible'>,
    @Inject(AGGREGATE_STORE) private readonly aggregates: AggregateStore,
    @Inject(CONFIG) private readonly config: Pick<Config, 'encryptionKey'>,
  ) {}

  get catalogModels(): Pick<Catalog, 'get'> {
    return this.catalog;
  }

  async list(workspaceId: string): Promise<PresetRow[]> {
    return (await listPresets(this.sql, workspaceId)).map((p) => ({ ...p, config: this.open(workspaceId, p.slug, p.config) }));
  }

  async get(workspaceId: string, slug: string): Promise<PresetWithVersions> {
    const found = await this.stored(workspaceId, slug);
    if (!found) throw presetNotFound(slug);
    return {
      ...found,
      config: this.open(workspaceId, slug, found.config),
      versions: found.versions.map((v) => ({ ...v, config: this.open(workspaceId, slug, v.config) })),
    };
  }

  /** As stored: system prompts sealed (issue 41 S4). */
  private stored(workspaceId: string, slug: string): Promise<PresetWithVersions | null> {
    return getPreset(this.sql, workspaceId, slug);
  }

  private open(workspaceId: string, slug: string, config: PresetRow['config']): PresetRow['config'] {
    return openPresetConfig(config, this.config.encryptionKey, workspaceId, slug);
  }

  async create(workspaceId: string, request: PresetRequest, metadata: EventMetadata): Promise<PresetWithVersions> {
    const { slug, name = null, description = null, config = {} } = request;
    const sealed = sealPresetConfig(config, this.config.encryptionKey, workspaceId, slug);
    await this.execute(workspaceId, slug, { type: 'CreatePreset', workspaceId, slug, name, description, config: sealed }, metadata);
    return this.get(workspaceId, slug);
  }

  async update(workspaceId: string, request: PresetRequest, metadata: EventMetadata): Promise<PresetWithVersions> {
    const { slug, name, description, config } = request;
    const latest = config === undefined ? undefined : (await this.stored(workspaceId, slug))?.config;
    const sealed = config === undefined ? undefined : sealPresetConfig(config, this.config.encryptionKey, workspaceId, slug, latest);
    await this.execute(workspaceId, slug, { type: 'UpdatePreset', workspaceId, slug, name, description, config: sealed }, metadata);
    return this.get(workspaceId, slug);
  }

  async rollback(workspaceId: string, slug: string, version: number, metadata: EventMetadata): Promise<PresetWithVersions> {
    await this.execute(workspaceId, slug, { type: 'RollbackPreset', workspaceId, slug, version }, metadata);
    return this.get(workspaceId, slug);
  }

  async delete(workspaceId: string, slug: string, metadata: EventMetadata): Promise<void> {
    await this.execute(workspaceId, slug, { type: 'DeletePreset', workspaceId, slug }, metadata);
  }

  private async execute(workspaceId: string, slug: string, command: PresetCommand, metadata: EventMetadata): Promise<void> {
    const handled = await this.aggregates.handle(presetDecider, presetStream(workspaceId, slug), command, metadata).catch((err: unknown) => {
      if (!(err instanceof DomainError)) throw err;
      if (err.code === 'preset_not_found') throw presetNotFound(slug);
      if (err.code === 'preset_exists') throw DomainError.conflict(err.message, err.code, 'slug');
      throw DomainError.invalid(err.message, err.code === 'preset_version_not_found' ? 'version' : 'slug', err.code);
    });
    if (handled.appended) await this.projections.waitUntilVisible(handled.appended.position, ['presets', 'audit_log']);
  }
}

export function presetNotFound(slug: string): DomainError {
  return DomainError.notFound(`No preset '${slug}' in this workspace.`, 'preset_not_found', 'slug');
}
