import { deciderSpec } from '@svc/eventstore/testing/decider-spec';
import { presetDecider, type PresetEvent } from './preset';

const spec = deciderSpec(presetDecider);
const ids = { workspaceId: 'w1', slug: 'support' };
const data = { workspace_id: 'w1', slug: 'support' };
const v1 = { model: 'sim/echo', system_prompt: 'Be brief.' };
const v2 = { model: 'sim/echo', system_prompt: 'Be kind.' };
const created: PresetEvent = { type: 'PresetCreated', data: { ...data, name: 'Support', description: null, config: v1 } };
const added = (version: number, config: object, rolledBackTo: number | null = null): PresetEvent => ({
  type: 'PresetVersionAdded',
  data: { ...data, version, config, rolled_back_to: rolledBackTo },
});
const deleted: PresetEvent = { type: 'PresetDeleted', data };

describe('preset decider (spec 2.5, 4.18)', () => {
  it('creates a preset once, as version 1; a slug is lower-case letters, digits and hyphens', () => {
    spec
      .given([])
      .when({ type: 'CreatePreset', ...ids, name: 'Support', description: null, config: v1 })
      .then([created]);
    spec
      .given([created])
      .when({ type: 'CreatePreset', ...ids, name: 'Again', description: null, config: v1 })
      .thenThrows('preset_exists');
    spec
      .given([])
      .when({ type: 'CreatePreset', ...ids, slug: 'has spaces', name: null, description: null, config: {} })
      .thenThrows('invalid_preset_slug');
  });

  it('a config change adds a version; the same config adds none; name and description are not versioned', () => {
    spec
      .given([created])
      .when({ type: 'UpdatePreset', ...ids, config: v2 })
      .then([added(2, v2)]);
    spec
      .given([created])
      .when({ type: 'UpdatePreset', ...ids, config: v1 })
      .then([]);
    spec
      .given([created])
      .when({ type: 'UpdatePreset', ...ids, description: 'For the help desk' })
      .then([{ type: 'PresetDetailsChanged', data: { ...data, name: 'Support', description: 'For the help desk' } }]);
    spec
      .given([created, added(2, v2)])
      .when({ type: 'UpdatePreset', ...ids, name: 'Help', config: v1 })
      .then([{ type: 'PresetDetailsChanged', data: { ...data, name: 'Help', description: null } }, added(3, v1)]);
  });

  it('a rollback makes an old config the latest again, as a new version', () => {
    spec
      .given([created, added(2, v2)])
      .when({ type: 'RollbackPreset', ...ids, version: 1 })
      .then([added(3, v1, 1)]);
    spec
      .given([created, added(2, v2)])
      .when({ type: 'RollbackPreset', ...ids, version: 3 })
      .thenThrows('preset_version_not_found');
    spec
      .given([created])
      .when({ type: 'RollbackPreset', ...ids, version: 0 })
      .thenThrows('preset_version_not_found');
  });

  it('deletes; a deleted or unknown preset is not found; made again it starts from version 1', () => {
    spec
      .given([created])
      .when({ type: 'DeletePreset', ...ids })
      .then([deleted]);
    for (const command of [
      { type: 'DeletePreset' as const, ...ids },
      { type: 'UpdatePreset' as const, ...ids, config: v2 },
      { type: 'RollbackPreset' as const, ...ids, version: 1 },
    ]) {
      spec.given([]).when(command).thenThrows('preset_not_found');
      spec.given([created, deleted]).when(command).thenThrows('preset_not_found');
    }
    spec
      .given([created, added(2, v2), deleted, created])
      .when({ type: 'UpdatePreset', ...ids, config: v2 })
      .then([added(2, v2)]);
  });
});
