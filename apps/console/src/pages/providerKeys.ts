/** The provider keys page's rows and form; pure, so the tests can pin them. */
import { ApiFailure } from '../api';
import type { ProviderKeyList, SavedProviderKey } from '../records';

/** One provider of the page: its saved key, if any, and whether a key can still be saved for it. */
export interface ProviderRow {
  provider: string;
  saved: SavedProviderKey | null;
  inCatalog: boolean;
}

/**
 * Every provider of the catalog, with or without a key, plus any saved key whose provider has
 * left the catalog (it can still be seen and deleted), by name.
 */
export function providerRows(list: ProviderKeyList): ProviderRow[] {
  const saved = new Map(list.data.map((k) => [k.provider, k]));
  const names = new Set([...list.providers, ...saved.keys()]);
  const catalog = new Set(list.providers);
  return [...names].sort().map((provider) => ({ provider, saved: saved.get(provider) ?? null, inCatalog: catalog.has(provider) }));
}

/**
 * The body of PUT /v1/provider-keys/{provider}. A pasted key often brings a line break or a space
 * at its ends, which the API would refuse; one inside it is left for the API to name.
 */
export function providerKeyBody(provider: string, apiKey: string): { body: { api_key: string } } | { problem: ApiFailure } {
  if (provider === '') return { problem: new ApiFailure(400, null, 'provider', 'Choose the provider this key is for.') };
  const key = apiKey.trim();
  if (key === '') return { problem: new ApiFailure(400, null, 'api_key', `Paste the API key your ${provider} account gave you.`) };
  return { body: { api_key: key } };
}
