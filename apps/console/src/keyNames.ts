/**
 * Records name the key that made a change as `key:<id>` (the audit log's actor, a preset
 * version's `created_by`); a person knows their keys by name. Pure, so the spec can pin it.
 */
import type { KeyRecord } from './records';

/** The workspace's key names by id; keys without a name are left out and read as their id. */
export type KeyNames = ReadonlyMap<string, string>;

export function keyNames(keys: readonly Pick<KeyRecord, 'id' | 'name'>[]): KeyNames {
  return new Map(keys.filter((k) => k.name).map((k) => [k.id, k.name!]));
}

/** A `key:<id>` reference as the key's name and id; null for any other actor (`admin`, `cli`). */
export function keyRef(ref: string | null, names: KeyNames): { id: string; name: string | null } | null {
  if (!ref?.startsWith('key:')) return null;
  const id = ref.slice(4);
  return { id, name: names.get(id) ?? null };
}
