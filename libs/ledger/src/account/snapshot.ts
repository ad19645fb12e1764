import { Map as ImmutableMap, OrderedMap } from 'immutable';
import type { SnapshotCodec } from '@svc/eventstore';
import type { AccountState } from './state';

/*
 * The account's state as a snapshot (issue 45): plain JSON, with its three kinds of value JSON
 * has no word for tagged: a bigint (every amount), a persistent map and an ordered one (open
 * holds, Idempotency-Keys and reaped holds, whose order is the order they are forgotten in).
 * Generic over the state's shape, so a field added to the state is kept without a change here;
 * a change of what a field means still needs ACCOUNT_SNAPSHOT_VERSION moved (see its spec).
 */

/**
 * Names the account state's shape and meaning. Move it whenever `evolve` (./state.ts) or what
 * it reads changes what a state holds: every snapshot kept before is then ignored, and each
 * account is read whole once more, instead of decided on a state of the old meaning.
 */
export const ACCOUNT_SNAPSHOT_VERSION = 'account-1';

const BIGINT = '$bigint';
const MAP = '$map';
const ORDERED_MAP = '$orderedMap';
/** A plain object whose one key happens to be a tag (a key or budget named so), kept apart from the tagged values. */
const OBJECT = '$object';
const TAGS = new Set([BIGINT, MAP, ORDERED_MAP, OBJECT]);

export function encodeValue(value: unknown): unknown {
  if (typeof value === 'bigint') return { [BIGINT]: value.toString() };
  if (OrderedMap.isOrderedMap(value)) return { [ORDERED_MAP]: [...(value as OrderedMap<string, unknown>)].map(([k, v]) => [k, encodeValue(v)]) };
  if (ImmutableMap.isMap(value)) return { [MAP]: [...(value as ImmutableMap<string, unknown>)].map(([k, v]) => [k, encodeValue(v)]) };
  if (Array.isArray(value)) return value.map(encodeValue);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = encodeValue(v);
    const keys = Object.keys(out);
    return keys.length === 1 && TAGS.has(keys[0]) ? { [OBJECT]: out } : out;
  }
  return value;
}

export function decodeValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(decodeValue);
  if (value === null || typeof value !== 'object') return value;
  const tagged = value as Record<string, unknown>;
  const keys = Object.keys(tagged);
  if (keys.length === 1) {
    const entries = (list: unknown) => (list as [string, unknown][]).map(([k, v]) => [k, decodeValue(v)] as [string, unknown]);
    if (keys[0] === BIGINT) return BigInt(tagged[BIGINT] as string);
    if (keys[0] === ORDERED_MAP) return OrderedMap(entries(tagged[ORDERED_MAP]));
    if (keys[0] === MAP) return ImmutableMap(entries(tagged[MAP]));
    if (keys[0] === OBJECT) return decodeObject(tagged[OBJECT] as Record<string, unknown>);
  }
  return decodeObject(tagged);
}

function decodeObject(tagged: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(tagged)) out[k] = decodeValue(tagged[k]);
  return out;
}

export const accountSnapshot: SnapshotCodec<AccountState> = {
  version: ACCOUNT_SNAPSHOT_VERSION,
  encode: encodeValue,
  decode: (data) => decodeValue(data) as AccountState,
  size: (state) => state.holds.size + state.idempotency.size + state.reaped.size + Object.keys(state.keys).length + Object.keys(state.budgets).length,
};
