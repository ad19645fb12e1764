import type { RecordedEvent } from '@svc/eventstore';
import type { PresetConfig, PresetEvent } from '../preset';
import type { SqlExecutor } from '@svc/platform';
import { eventTime, perEvent, type Projection } from '@svc/projections';

type P<T extends PresetEvent['type']> = RecordedEvent<T, Extract<PresetEvent, { type: T }>['data']>;

/** Each workspace's presets (spec 2.5, 4.18): the latest config, and every version. */
export const presetsProjection: Projection = perEvent({
  name: 'presets',
  tables: ['presets', 'preset_versions'],
  schema: [
    `CREATE TABLE IF NOT EXISTS presets (
      workspace_id text NOT NULL,
      slug text NOT NULL,
      name text,
      description text,
      version integer NOT NULL,
      config jsonb NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (workspace_id, slug)
    )`,
    `CREATE TABLE IF NOT EXISTS preset_versions (
      workspace_id text NOT NULL,
      slug text NOT NULL,
      version integer NOT NULL,
      config jsonb NOT NULL,
      rolled_back_to integer,
      created_at timestamptz NOT NULL,
      created_by text,
      PRIMARY KEY (workspace_id, slug, version)
    )`,
  ],
  handlers: {
    PresetCreated: async (e: P<'PresetCreated'>, tx) => {
      const d = e.data;
      const at = eventTime(e);
      await tx.query(
        `INSERT INTO presets (workspace_id, slug, name, description, version, config, created_at, updated_at) VALUES ($1, $2, $3, $4, 1, $5, $6, $6)`,
        [d.workspace_id, d.slug, d.name, d.description, JSON.stringify(d.config), at],
      );
      await tx.query(
        `INSERT INTO preset_versions (workspace_id, slug, version, config, rolled_back_to, created_at, created_by) VALUES ($1, $2, 1, $3, NULL, $4, $5)`,
        [d.workspace_id, d.slug, JSON.stringify(d.config), at, e.metadata.actor ?? null],
      );
    },
    PresetDetailsChanged: async (e: P<'PresetDetailsChanged'>, tx) => {
      const d = e.data;
      await tx.query('UPDATE presets SET name = $3, description = $4, updated_at = $5 WHERE workspace_id = $1 AND slug = $2', [
        d.workspace_id,
        d.slug,
        d.name,
        d.description,
        eventTime(e),
      ]);
    },
    PresetVersionAdded: async (e: P<'PresetVersionAdded'>, tx) => {
      const d = e.data;
      const at = eventTime(e);
      await tx.query('UPDATE presets SET version = $3, config = $4, updated_at = $5 WHERE workspace_id = $1 AND slug = $2', [
        d.workspace_id,
        d.slug,
        d.version,
        JSON.stringify(d.config),
        at,
      ]);
      await tx.query(
        `INSERT INTO preset_versions (workspace_id, slug, version, config, rolled_back_to, created_at, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [d.workspace_id, d.slug, d.version, JSON.stringify(d.config), d.rolled_back_to, at, e.metadata.actor ?? null],
      );
    },
    PresetDeleted: async (e: P<'PresetDeleted'>, tx) => {
      await tx.query('DELETE FROM presets WHERE workspace_id = $1 AND slug = $2', [e.data.workspace_id, e.data.slug]);
      await tx.query('DELETE FROM preset_versions WHERE workspace_id = $1 AND slug = $2', [e.data.workspace_id, e.data.slug]);
    },
  },
});

export interface PresetRow {
  slug: string;
  name: string | null;
  description: string | null;
  version: number;
  config: PresetConfig;
  createdAt: string;
  updatedAt: string;
}

export interface PresetVersionRow {
  version: number;
  config: PresetConfig;
  rolledBackTo: number | null;
  createdAt: string;
  createdBy: string | null;
}

const json = <T>(v: unknown): T => (typeof v === 'string' ? JSON.parse(v) : v) as T;
const presetRow = (r: Record<string, any>): PresetRow => ({
  slug: r.slug,
  name: r.name,
  description: r.description,
  version: r.version,
  config: json<PresetConfig>(r.config),
  createdAt: new Date(r.created_at).toISOString(),
  updatedAt: new Date(r.updated_at).toISOString(),
});

export async function listPresets(sql: SqlExecutor, workspaceId: string): Promise<PresetRow[]> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM presets WHERE workspace_id = $1 ORDER BY slug', [workspaceId]);
  return rows.map(presetRow);
}

export async function getPreset(sql: SqlExecutor, workspaceId: string, slug: string): Promise<(PresetRow & { versions: PresetVersionRow[] }) | null> {
  const { rows } = await sql.query<Record<string, any>>('SELECT * FROM presets WHERE workspace_id = $1 AND slug = $2', [workspaceId, slug]);
  if (!rows[0]) return null;
  const versions = await sql.query<Record<string, any>>('SELECT * FROM preset_versions WHERE workspace_id = $1 AND slug = $2 ORDER BY version', [
    workspaceId,
    slug,
  ]);
  return {
    ...presetRow(rows[0]),
    versions: versions.rows.map((v) => ({
      version: v.version,
      config: json<PresetConfig>(v.config),
      rolledBackTo: v.rolled_back_to,
      createdAt: new Date(v.created_at).toISOString(),
      createdBy: v.created_by,
    })),
  };
}
