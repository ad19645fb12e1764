import { api } from '../api';
import { keyNames, type KeyNames } from '../keyNames';
import type { KeyRecord } from '../records';
import { useLoad } from '../ui';

const NONE: KeyNames = new Map();

/**
 * The workspace's key names, for pages whose records name a key by id. Until they come, or if
 * they cannot be read, the ids stand in: the page's own records are shown either way.
 */
export function useKeyNames(): KeyNames {
  const keys = useLoad(() => api<{ data: KeyRecord[] }>('GET', '/keys').then((r) => keyNames(r.data)), []);
  return keys.data ?? NONE;
}
