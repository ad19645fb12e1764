/**
 * Presets (spec 2.5, 4.18): a workspace's named request settings, event-sourced on
 * `preset-<workspace>-<slug>`. A change of config adds a version (numbered from 1); a rollback
 * makes an old config the latest again, as a new version; name and description are not
 * versioned. Requests always use the latest version.
 */
import { DomainError, type Decider, type DomainEvent } from '@svc/eventstore';

export const presetStream = (workspaceId: string, slug: string) => `preset-${workspaceId}-${slug}`;

/** Lower-case letters, digits and hyphens, starting with a letter or digit, 1 to 64 characters: safe in `@preset/<slug>` and in a path. */
export const PRESET_SLUG = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** Spec 2.5: every member optional; checked against the catalog at the edge. */
export interface PresetConfig {
  model?: string;
  models?: string[];
  system_prompt?: string;
  /** At rest: system_prompt sealed (sealing.ts, issue 41 S4); never both. */
  system_prompt_sealed?: string;
  params?: Record<string, unknown>;
  provider?: Record<string, unknown>;
  reasoning?: Record<string, unknown>;
  plugins?: Record<string, unknown>[];
  tools?: Record<string, unknown>[];
  cache?: { enabled?: boolean; ttl_seconds?: number };
}

export type PresetEvent =
  | DomainEvent<'PresetCreated', { workspace_id: string; slug: string; name: string | null; description: string | null; config: PresetConfig }>
  | DomainEvent<'PresetDetailsChanged', { workspace_id: string; slug: string; name: string | null; description: string | null }>
  | DomainEvent<'PresetVersionAdded', { workspace_id: string; slug: string; version: number; config: PresetConfig; rolled_back_to: number | null }>
  | DomainEvent<'PresetDeleted', { workspace_id: string; slug: string }>;

export type PresetCommand =
  | { type: 'CreatePreset'; workspaceId: string; slug: string; name: string | null; description: string | null; config: PresetConfig }
  /** Fields left undefined keep their value. */
  | { type: 'UpdatePreset'; workspaceId: string; slug: string; name?: string | null; description?: string | null; config?: PresetConfig }
  | { type: 'RollbackPreset'; workspaceId: string; slug: string; version: number }
  | { type: 'DeletePreset'; workspaceId: string; slug: string };

export interface PresetState {
  exists: boolean;
  name: string | null;
  description: string | null;
  /** Every version's config, version n at index n - 1. */
  versions: readonly PresetConfig[];
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function requireExisting(state: PresetState, slug: string): void {
  if (!state.exists) throw new DomainError('preset_not_found', `No preset '${slug}' in this workspace.`);
}

function create(command: Extract<PresetCommand, { type: 'CreatePreset' }>, state: PresetState): PresetEvent[] {
  if (state.exists) throw new DomainError('preset_exists', `A preset '${command.slug}' already exists in this workspace; PATCH it instead.`);
  if (!PRESET_SLUG.test(command.slug))
    throw new DomainError('invalid_preset_slug', 'A slug is 1 to 64 lower-case letters, digits and hyphens, starting with a letter or digit.');
  const { workspaceId: workspace_id, slug, name, description, config } = command;
  return [{ type: 'PresetCreated', data: { workspace_id, slug, name, description, config } }];
}

/** A config equal to the latest adds no version; name and description are recorded only when they change. */
function update(command: Extract<PresetCommand, { type: 'UpdatePreset' }>, state: PresetState): PresetEvent[] {
  requireExisting(state, command.slug);
  const ids = { workspace_id: command.workspaceId, slug: command.slug };
  const events: PresetEvent[] = [];
  const name = command.name === undefined ? state.name : command.name;
  const description = command.description === undefined ? state.description : command.description;
  if (name !== state.name || description !== state.description) events.push({ type: 'PresetDetailsChanged', data: { ...ids, name, description } });
  if (command.config !== undefined && !same(command.config, state.versions.at(-1))) {
    events.push({ type: 'PresetVersionAdded', data: { ...ids, version: state.versions.length + 1, config: command.config, rolled_back_to: null } });
  }
  return events;
}

function rollback(command: Extract<PresetCommand, { type: 'RollbackPreset' }>, state: PresetState): PresetEvent[] {
  requireExisting(state, command.slug);
  const config = Number.isInteger(command.version) ? state.versions[command.version - 1] : undefined;
  if (config === undefined) throw new DomainError('preset_version_not_found', `Preset '${command.slug}' has versions 1 to ${state.versions.length}.`);
  return [
    {
      type: 'PresetVersionAdded',
      data: { workspace_id: command.workspaceId, slug: command.slug, version: state.versions.length + 1, config, rolled_back_to: command.version },
    },
  ];
}

function remove(command: Extract<PresetCommand, { type: 'DeletePreset' }>, state: PresetState): PresetEvent[] {
  requireExisting(state, command.slug);
  return [{ type: 'PresetDeleted', data: { workspace_id: command.workspaceId, slug: command.slug } }];
}

export const presetDecider: Decider<PresetCommand, PresetState, PresetEvent> = {
  initialState: () => ({ exists: false, name: null, description: null, versions: [] }),
  decide(command, state) {
    switch (command.type) {
      case 'CreatePreset':
        return create(command, state);
      case 'UpdatePreset':
        return update(command, state);
      case 'RollbackPreset':
        return rollback(command, state);
      case 'DeletePreset':
        return remove(command, state);
    }
  },
  evolve(state, event) {
    switch (event.type) {
      // A slug deleted and made again is a new preset: its versions start from 1.
      case 'PresetCreated':
        return { exists: true, name: event.data.name, description: event.data.description, versions: [event.data.config] };
      case 'PresetDetailsChanged':
        return { ...state, name: event.data.name, description: event.data.description };
      case 'PresetVersionAdded':
        return { ...state, versions: [...state.versions, event.data.config] };
      case 'PresetDeleted':
        return { exists: false, name: null, description: null, versions: [] };
    }
  },
};
