import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';

/**
 * EVENTSTORE_URL, read by the grammar of `@eventstore/db-client` 6.x
 * (dist/Client/parseConnectionString.js) but stricter where that parser lets a mistake through
 * silently: it takes `parseInt` of a port (`2113x` is 2113, `99999` is accepted), ignores an
 * unknown option with a console warning (a misspelt `tlsCAFile` then fails only at the first
 * call, as a TLS error), and reads a path after a host as one more host.
 *
 *   esdb://[user:password@]host[:port][?key=value&...]                 one node, no discovery
 *   esdb://[user:password@]host1:port,host2:port,...[?...]             gossip seeds (a cluster)
 *   esdb+discover://[user:password@]name[:port][?...]                  gossip on one name (DNS)
 *
 * `kurrentdb:`, `kurrent:` (and their `+discover` forms) are the same strings under the
 * server's new name; this client knows only `esdb`, so they are rewritten for it.
 *
 * No message repeats the URL or its credentials: it may hold the admin password.
 */
export type EventStoreNodePreference = 'leader' | 'follower' | 'read_only_replica' | 'random';

export interface EventStoreUrl {
  /** The client discovers the cluster by gossip (several seeds, or `+discover`); false: one node, dialled directly. */
  cluster: boolean;
  hosts: Array<{ host: string; port: number }>;
  /**
   * Which member discovery picks (the client's default: leader). A single `esdb://` node is
   * dialled whatever this says: the client only applies it to discovery.
   */
  nodePreference: EventStoreNodePreference;
  tls: boolean;
  /** What to hand `EventStoreDBClient.connectionString`: the same settings, in the form this client reads them. */
  clientConnectionString: string;
}

const SCHEMES: Record<string, { discover: boolean }> = {
  esdb: { discover: false },
  'esdb+discover': { discover: true },
  kurrentdb: { discover: false },
  'kurrentdb+discover': { discover: true },
  kurrent: { discover: false },
  'kurrent+discover': { discover: true },
};

const NODE_PREFERENCES: Record<string, EventStoreNodePreference> = {
  leader: 'leader',
  follower: 'follower',
  readonlyreplica: 'read_only_replica',
  random: 'random',
};

type OptionKind = 'boolean' | 'count' | 'keepAlive' | 'text' | 'nodePreference';
/** The options the client reads, by its spelling; it matches keys ignoring case, `-` and `_`. */
const OPTIONS: Record<string, OptionKind> = {
  tls: 'boolean',
  tlsVerifyCert: 'boolean',
  tlsCAFile: 'text',
  userCertFile: 'text',
  userKeyFile: 'text',
  nodePreference: 'nodePreference',
  maxDiscoverAttempts: 'count',
  discoveryInterval: 'count',
  gossipTimeout: 'count',
  defaultDeadline: 'count',
  keepAliveInterval: 'keepAlive',
  keepAliveTimeout: 'keepAlive',
  throwOnAppendFailure: 'boolean',
  connectionName: 'text',
};
const flat = (key: string) => key.toLowerCase().replace(/[_-]/g, '');
const OPTION_BY_FLAT_KEY = new Map(Object.keys(OPTIONS).map((key) => [flat(key), key]));

/** Throws an Error whose message says what is wrong (never the URL itself). */
export function parseEventStoreUrl(value: string): EventStoreUrl {
  const text = value.trim().replace(/\/+$/, '');
  const scheme = /^([a-z+]+):\/\//.exec(text);
  if (!scheme || !SCHEMES[scheme[1]!]) {
    throw new Error(`expected ${Object.keys(SCHEMES).join(':// or ')}:// followed by the node(s)`);
  }
  const discover = SCHEMES[scheme[1]!]!.discover;
  let rest = text.slice(scheme[0].length);

  // As the client: `user:password@`; it splits them at every `:`, so neither may hold a `:` or
  // an `@` unencoded (it percent-decodes both).
  let credentials = '';
  const login = /^([^:@/?]+):([^:@]+)@/.exec(rest);
  if (login) {
    credentials = login[0];
    rest = rest.slice(login[0].length);
  } else if (/^[^?]*@/.test(rest)) {
    throw new Error('expected user:password@ before the node(s), with any : or @ in them percent-encoded (%3A, %40)');
  }

  const queryAt = rest.indexOf('?');
  const hostPart = (queryAt < 0 ? rest : rest.slice(0, queryAt)).replace(/\/$/, '');
  const query = queryAt < 0 ? '' : rest.slice(queryAt + 1);
  if (hostPart === '') throw new Error('expected at least one node (host:port) after the scheme');
  const hosts = hostPart.split(',').map((entry, i) => node(entry.trim(), i + 1));
  const seen = new Set<string>();
  for (const { host, port } of hosts) {
    if (seen.has(`${host}:${port}`)) throw new Error(`node ${host}:${port} is listed twice`);
    seen.add(`${host}:${port}`);
  }

  const options = queryOptions(query);
  if (options.get('tlsVerifyCert') === 'false') {
    // The client only warns: it has no way to skip verification, so the setting would lie.
    throw new Error('tlsVerifyCert=false is not supported by @eventstore/db-client; give the CA with tlsCAFile instead');
  }
  if (options.has('userCertFile') !== options.has('userKeyFile')) {
    throw new Error('userCertFile and userKeyFile go together');
  }
  const tls = options.get('tls') !== 'false';
  for (const key of ['tlsCAFile', 'userCertFile', 'userKeyFile']) {
    const path = options.get(key);
    if (path === undefined || (!tls && key === 'tlsCAFile')) continue;
    const decoded = decodeURIComponent(path);
    // The client reads it when it is created and stops the process with no name attached.
    if (!existsSync(isAbsolute(decoded) ? decoded : resolve(decoded))) throw new Error(`${key}: no such file: ${decoded}`);
  }

  // This client gossips with only the first host of an `esdb+discover` list (it logs "Using first")
  // and with every host of an `esdb` list: the list form keeps every node a seed.
  const clientScheme = discover && hosts.length === 1 ? 'esdb+discover' : 'esdb';
  const clientConnectionString =
    `${clientScheme}://${credentials}${hosts.map((h) => `${h.host}:${h.port}`).join(',')}` +
    (options.size ? `?${[...options].map(([k, v]) => `${k}=${v}`).join('&')}` : '');
  return {
    cluster: discover || hosts.length > 1,
    hosts,
    nodePreference: NODE_PREFERENCES[flat(options.get('nodePreference') ?? 'leader')]!,
    tls,
    clientConnectionString,
  };
}

function node(entry: string, index: number): { host: string; port: number } {
  const match = /^([A-Za-z0-9_.-]+)(?::(.*))?$/.exec(entry);
  if (!match) throw new Error(`node ${index}: expected host[:port], got ${JSON.stringify(entry)}`);
  const [, host, rawPort] = match;
  if (rawPort === undefined) return { host: host!, port: 2113 };
  if (!/^\d{1,5}$/.test(rawPort) || Number(rawPort) < 1 || Number(rawPort) > 65535) {
    throw new Error(`node ${index} (${host}): expected a port from 1 to 65535, got ${JSON.stringify(rawPort)}`);
  }
  return { host: host!, port: Number(rawPort) };
}

/** The options by the client's spelling of their keys, values as written (checked). */
function queryOptions(query: string): Map<string, string> {
  const options = new Map<string, string>();
  if (query === '') return options;
  for (const pair of query.split('&')) {
    const eq = pair.indexOf('=');
    const rawKey = eq < 0 ? pair : pair.slice(0, eq);
    const value = eq < 0 ? '' : pair.slice(eq + 1).trim();
    const key = OPTION_BY_FLAT_KEY.get(flat(rawKey));
    if (!key) throw new Error(`unknown option ${JSON.stringify(rawKey)} (known: ${Object.keys(OPTIONS).join(', ')})`);
    if (options.has(key)) throw new Error(`option ${key} is given twice`);
    if (value === '') throw new Error(`option ${key} has no value`);
    const kind = OPTIONS[key]!;
    const ok =
      (kind === 'boolean' && (value === 'true' || value === 'false')) ||
      (kind === 'count' && /^\d+$/.test(value) && Number(value) > 0) ||
      (kind === 'keepAlive' && (value === '-1' || /^\d+$/.test(value))) ||
      (kind === 'nodePreference' && NODE_PREFERENCES[flat(value)] !== undefined) ||
      kind === 'text';
    if (!ok) throw new Error(`option ${key}: expected ${EXPECTED[kind]}, got ${JSON.stringify(value)}`);
    options.set(key, value);
  }
  return options;
}

const EXPECTED: Record<OptionKind, string> = {
  boolean: 'true or false',
  count: 'a positive integer',
  keepAlive: 'milliseconds, or -1 for none',
  text: 'a value',
  nodePreference: 'leader, follower, read_only_replica or random',
};
