/** The upstream client of each catalog provider, by name (ReadonlyMap<string, Provider>). */
export const PROVIDER_CLIENTS = Symbol('PROVIDER_CLIENTS');
/** Base URL of the in-process simulated upstream (string | null): null when this process started none. */
export const SIMULATOR_URL = Symbol('SIMULATOR_URL');
