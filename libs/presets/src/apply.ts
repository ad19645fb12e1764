/**
 * Using a preset (spec 1, 2.5, 4.2): `model: "@preset/<slug>"`, `model: "<model>@preset/<slug>"`
 * or the `preset` field. Request fields beat the preset's; `tools` and `plugins` are merged
 * (the request's win where both name the same one); `config.models` are the fallbacks;
 * `system_prompt` is prepended; `provider` and `reasoning` are merged member by member; `params`
 * fill what the request leaves out. Applied to the chat-completions body every interface is
 * translated into, so messages, responses and completions get the same rules.
 */
import { DomainError } from '@svc/platform';
import type { PresetConfig } from './preset';

/** The latest version of a preset, as a request sees it. */
export interface StoredPreset {
  version: number;
  config: PresetConfig;
}

/** Which preset, at which version, a request ran with: recorded on its generation. */
export interface PresetUse {
  slug: string;
  version: number;
}

export interface PresetReference {
  slug: string;
  /** The model the request names besides the preset (`<model>@preset/<slug>`, or `model` next to `preset`). */
  model: string | null;
  /** The field the reference came from, for errors. */
  param: 'model' | 'preset';
}

const MARK = '@preset/';

/** The preset a request names, if any. */
export function presetReference(body: unknown): PresetReference | null {
  if (body === null || typeof body !== 'object') return null;
  const { model, preset } = body as { model?: unknown; preset?: unknown };
  if (preset !== undefined && preset !== null && (typeof preset !== 'string' || preset === ''))
    throw DomainError.invalid('preset must be a preset slug.', 'preset');
  if (typeof preset === 'string') {
    const slug = preset.startsWith(MARK) ? preset.slice(MARK.length) : preset;
    return { slug, model: typeof model === 'string' && model !== '' ? model : null, param: 'preset' };
  }
  if (typeof model === 'string') {
    const at = model.indexOf(MARK);
    if (at >= 0) return { slug: model.slice(at + MARK.length), model: at > 0 ? model.slice(0, at) : null, param: 'model' };
  }
  return null;
}

/** The preset a request names, from the workspace's; 404 preset_not_found (spec 7) otherwise. */
export function findPreset(reference: PresetReference, presets: ReadonlyMap<string, StoredPreset>): StoredPreset {
  const found = presets.get(reference.slug);
  if (!found) throw DomainError.notFound(`No preset '${reference.slug}' in this workspace (GET /v1/presets lists them).`, 'preset_not_found', reference.param);
  return found;
}

type Named = Record<string, unknown>;

const toolName = (tool: Named) => {
  const fn = tool.function as { name?: unknown } | undefined;
  return typeof fn?.name === 'string' ? `function:${fn.name}` : `type:${String(tool.type)}`;
};

/** The preset's entries, then the request's; where both have the same one, the request's replaces it in place. */
function merge(preset: Named[] | undefined, request: unknown, key: (entry: Named) => string): Named[] | undefined {
  if (!preset?.length) return request as Named[] | undefined;
  if (!Array.isArray(request) || request.length === 0) return preset;
  const mine = new Map((request as Named[]).map((entry) => [key(entry), entry]));
  const merged = preset.map((entry) => mine.get(key(entry)) ?? entry);
  const taken = new Set(preset.map(key));
  return [...merged, ...(request as Named[]).filter((entry) => !taken.has(key(entry)))];
}

const shallow = (preset: Named | undefined, request: unknown) => (preset === undefined ? request : { ...preset, ...((request as Named | undefined) ?? {}) });

/** A chat-completions body with the preset applied; the preset fields themselves are gone. */
export function applyPreset<B extends Record<string, unknown>>(body: B, reference: PresetReference, preset: StoredPreset): B {
  const { config } = preset;
  const { preset: _field, ...rest } = body as Record<string, unknown>;
  const model = reference.model ?? config.model;
  if (!model) throw DomainError.invalid(`Preset '${reference.slug}' names no model: send one as "<model>@preset/${reference.slug}".`, 'model');
  const out: Record<string, unknown> = { ...rest, model };
  for (const [field, value] of Object.entries(config.params ?? {})) if (out[field] === undefined) out[field] = value;
  if (out.models === undefined && config.models?.length) out.models = config.models;
  if (config.system_prompt && Array.isArray(out.messages)) out.messages = [{ role: 'system', content: config.system_prompt }, ...out.messages];
  const provider = shallow(config.provider, out.provider);
  if (provider !== undefined) out.provider = provider;
  const reasoning = shallow(config.reasoning, out.reasoning);
  if (reasoning !== undefined) out.reasoning = reasoning;
  const tools = merge(config.tools, out.tools, toolName);
  if (tools !== undefined) out.tools = tools;
  const plugins = merge(config.plugins, out.plugins, (p) => String(p.id));
  if (plugins !== undefined) out.plugins = plugins;
  return out as B;
}
