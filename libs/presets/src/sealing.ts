/**
 * Issue 41 S4: a preset's system prompt is content as much as a prompt log is, so it is kept
 * sealed (AES-256-GCM under SVC_ENCRYPTION_KEY) in its events and read models, as
 * `system_prompt_sealed`, bound to its workspace and slug; it is opened where a request applies
 * it and where the presets API shows it. A preset saved before this keeps its plaintext
 * `system_prompt` and still reads; without the key a system prompt cannot be saved (prompt logs
 * are refused the same way), while presets without one work as before.
 */
import { DomainError, isSealedSecret, openSecret, sealSecret } from '@svc/platform';
import type { PresetConfig } from './preset';

const context = (workspaceId: string, slug: string) => `preset-system-prompt:${JSON.stringify([workspaceId, slug])}`;

export function presetPromptsUnavailable(): DomainError {
  return new DomainError(
    'preset_prompt_unavailable',
    'A preset with a system prompt cannot be saved: the gateway has no SVC_ENCRYPTION_KEY to protect it with. Ask the operator to set it, or leave system_prompt out.',
    { param: 'config.system_prompt' },
    'unavailable',
  );
}

/**
 * The config as stored: `system_prompt` sealed in place. `latest` (as stored) lends its sealed
 * value when the prompt is unchanged, so an equal config still adds no version (spec 2.5).
 */
export function sealPresetConfig(config: PresetConfig, key: Buffer | null, workspaceId: string, slug: string, latest?: PresetConfig): PresetConfig {
  if (config.system_prompt === undefined) return config;
  if (!key) throw presetPromptsUnavailable();
  const reuse =
    latest?.system_prompt_sealed !== undefined && openPresetConfig(latest, key, workspaceId, slug).system_prompt === config.system_prompt
      ? latest.system_prompt_sealed
      : undefined;
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(config)) {
    if (name === 'system_prompt') out.system_prompt_sealed = reuse ?? sealSecret(key, value as string, context(workspaceId, slug));
    else out[name] = value;
  }
  return out as PresetConfig;
}

/** The config as a request or a reader sees it: `system_prompt` in plaintext. */
export function openPresetConfig(config: PresetConfig, key: Buffer | null, workspaceId: string, slug: string): PresetConfig {
  const sealed = config.system_prompt_sealed;
  if (sealed === undefined) return config;
  if (!key || !isSealedSecret(sealed))
    throw new DomainError(
      'preset_prompt_unavailable',
      `The system prompt of preset '${slug}' cannot be opened: SVC_ENCRYPTION_KEY is missing or changed.`,
      {},
      'unavailable',
    );
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(config)) {
    if (name === 'system_prompt_sealed') out.system_prompt = openSecret(key, sealed, context(workspaceId, slug));
    else out[name] = value;
  }
  return out as PresetConfig;
}
