import { randomBytes } from 'node:crypto';
import { DomainError, SecretDecryptionError } from '@svc/platform';
import { openPresetConfig, sealPresetConfig } from './sealing';

/** Issue 41 S4: a preset's system prompt at rest. */
describe('preset system prompt sealing', () => {
  const key = randomBytes(32);
  const config = { model: 'sim/echo', system_prompt: 'Be brief about narwhals.', cache: { enabled: true } };

  it('seals system_prompt in place and opens it again', () => {
    const sealed = sealPresetConfig(config, key, 'ws1', 'brief');
    expect(JSON.stringify(sealed)).not.toContain('narwhals');
    expect(Object.keys(sealed)).toEqual(['model', 'system_prompt_sealed', 'cache']);
    expect(openPresetConfig(sealed, key, 'ws1', 'brief')).toEqual(config);
  });

  it('reuses the latest seal for an unchanged prompt, so an equal config stays equal', () => {
    const latest = sealPresetConfig(config, key, 'ws1', 'brief');
    expect(sealPresetConfig(config, key, 'ws1', 'brief', latest)).toEqual(latest);
    expect(sealPresetConfig({ ...config, system_prompt: 'Other.' }, key, 'ws1', 'brief', latest).system_prompt_sealed).not.toBe(latest.system_prompt_sealed);
  });

  it('opens only under its workspace and slug, and only with the key', () => {
    const sealed = sealPresetConfig(config, key, 'ws1', 'brief');
    expect(() => openPresetConfig(sealed, key, 'ws2', 'brief')).toThrow(SecretDecryptionError);
    expect(() => openPresetConfig(sealed, randomBytes(32), 'ws1', 'brief')).toThrow(SecretDecryptionError);
    expect(() => openPresetConfig(sealed, null, 'ws1', 'brief')).toThrow(DomainError);
  });

  it('without a key refuses a system prompt (503) but not a preset without one; a plaintext preset from before still reads', () => {
    let thrown: unknown;
    try {
      sealPresetConfig(config, null, 'ws1', 'brief');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ kind: 'unavailable', code: 'preset_prompt_unavailable' });
    expect(sealPresetConfig({ model: 'sim/echo' }, null, 'ws1', 'brief')).toEqual({ model: 'sim/echo' });
    expect(openPresetConfig(config, null, 'ws1', 'brief')).toEqual(config);
    expect(openPresetConfig(config, key, 'ws1', 'brief')).toEqual(config);
  });
});
