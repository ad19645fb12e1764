import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, createServer } from 'node:tls';
import { parse } from 'yaml';
import { parseEventStoreUrl } from '@svc/platform';

const root = join(__dirname, '..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');

/** The gateway's command line as `npm run start:gateway`, the image and compose each write it. */
function gatewayCommands(): Record<string, string[]> {
  const scripts = JSON.parse(read('package.json')).scripts as Record<string, string>;
  const cmd = /^CMD (\[.*\])$/m.exec(read('Dockerfile'));
  const compose = parse(read('docker-compose.yml')) as { services: { gateway: { command: string[] } } };
  return {
    'npm run start:gateway': scripts['start:gateway'].trim().split(/\s+/),
    Dockerfile: cmd ? (JSON.parse(cmd[1]) as string[]) : [],
    'docker-compose.yml': compose.services.gateway.command,
  };
}

describe('how the gateway is started in production', () => {
  // A young generation of 2 x 32 MB: a V8 limit only the command line sets (docs/BENCHMARKS.md,
  // sixth round: about a tenth less of the gateway's CPU per request under load). The bench
  // runs the flags of `start:gateway`, so every other way of starting it must say the same.
  it('runs the gateway with the same node flags everywhere, the young generation raised among them', () => {
    const commands = gatewayCommands();
    for (const argv of Object.values(commands)) {
      expect(argv[0]).toBe('node');
      expect(argv.at(-1)).toBe('dist/apps/gateway/src/main.js');
    }
    expect(commands.Dockerfile).toEqual(commands['npm run start:gateway']);
    expect(commands['docker-compose.yml']).toEqual(commands['npm run start:gateway']);
    expect(commands['npm run start:gateway']).toContain('--max-semi-space-size=32');
  });
});

interface ComposeService {
  image?: string;
  ports?: unknown[];
  expose?: unknown[];
  environment?: Record<string, string>;
  command?: string[];
  profiles?: string[];
  hostname?: string;
}

/** docker-compose.yml as compose reads it: `<<` merges resolved, anchors followed. */
function compose(): Record<string, ComposeService> {
  return (parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, ComposeService> }).services;
}

describe('the production layout (docker-compose.yml)', () => {
  // Anything published is reachable from wherever the host is: the event store would let anyone
  // read the ledger or append credits, the databases hold every balance and key hash.
  it("publishes the gateway ports (the default stack's and the profile ha's) and nothing else", () => {
    const published = Object.entries(compose())
      .filter(([, service]) => (service.ports ?? []).length > 0)
      .map(([name, service]) => [name, service.ports]);
    expect(published).toEqual([
      ['gateway', ['8080:8080']],
      ['gateway-ha', ['8081:8080']],
    ]);
  });

  it('runs EventStoreDB in secure mode, with the certificates the repository makes', () => {
    const services = compose();
    for (const [name, service] of Object.entries(services)) {
      expect([name, String(service.environment?.EVENTSTORE_INSECURE ?? 'false').toLowerCase()]).toEqual([name, 'false']);
    }
    const env = services.eventstore.environment!;
    expect(env.EVENTSTORE_CERTIFICATE_FILE).toMatch(/node\.crt$/);
    expect(env.EVENTSTORE_CERTIFICATE_PRIVATE_KEY_FILE).toMatch(/node\.key$/);
    expect(env.EVENTSTORE_TRUSTED_ROOT_CERTIFICATES_PATH).toBeTruthy();
    // The admin password comes from the operator, never a default written here.
    expect(env.EVENTSTORE_DEFAULT_ADMIN_PASSWORD).toMatch(/^\$\{EVENTSTORE_ADMIN_PASSWORD:\?/);
    expect(services.certs.command!.join(' ')).toContain('eventstore-certs.sh');
  });

  it('connects the gateway and the worker to the event store with a login, over TLS, trusting its CA', () => {
    const services = compose();
    const caDir = services.eventstore.environment!.EVENTSTORE_TRUSTED_ROOT_CERTIFICATES_PATH;
    for (const name of ['gateway', 'worker']) {
      const url = new URL(services[name].environment!.EVENTSTORE_URL);
      expect(url.username).toBe('admin');
      expect(decodeURIComponent(url.password)).toBe('${EVENTSTORE_ADMIN_PASSWORD}');
      expect(url.searchParams.get('tls')).toBe('true');
      expect(url.searchParams.get('tlsCAFile')).toBe(`${caDir}/ca.crt`);
    }
  });

  it('gives PostgreSQL a password of the operator and Redis no published port', () => {
    const services = compose();
    expect(services.postgres.environment!.POSTGRES_PASSWORD).toMatch(/^\$\{POSTGRES_PASSWORD:\?/);
    expect(decodeURIComponent(new URL(services.gateway.environment!.DATABASE_URL).password)).toBe('${POSTGRES_PASSWORD}');
    expect(services.redis.ports ?? []).toEqual([]);
  });

  // Each process counts its own metrics: the worker's are scraped from inside the network.
  it('gives the worker a metrics port on the compose network, not on the host', () => {
    const { worker, gateway } = compose();
    expect(worker.environment!.SVC_METRICS_PORT).toBe('9464');
    expect(worker.expose).toEqual(['9464']);
    expect(worker.ports ?? []).toEqual([]);
    // The rest of its configuration is the gateway's, as before.
    expect(worker.environment!.EVENTSTORE_URL).toBe(gateway.environment!.EVENTSTORE_URL);
    expect(worker.environment!.HOST).toBe('0.0.0.0');
    expect(gateway.environment!.SVC_METRICS_PORT).toBeUndefined();
  });

  // The script is what the certs service runs: its node certificate must be one a client that
  // trusts only the CA accepts for the host name the gateway dials (eventstore).
  it('makes certificates a client trusting only the CA accepts for host "eventstore"', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-esdb-certs-'));
    try {
      execFileSync('sh', [join(root, 'scripts/eventstore-certs.sh'), dir], { stdio: 'pipe' });
      expect(statSync(join(dir, 'node/node.key')).mode & 0o077).toBe(0);
      const ca = readFileSync(join(dir, 'ca/ca.crt'));
      const server = createServer({ cert: readFileSync(join(dir, 'node/node.crt')), key: readFileSync(join(dir, 'node/node.key')) }, (socket) =>
        socket.end('ok'),
      );
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      const port = (server.address() as AddressInfo).port;
      const dial = (servername: string) =>
        new Promise<string>((resolve) => {
          const socket = connect({ host: '127.0.0.1', port, servername, ca }, () => {
            socket.once('data', (d) => resolve(`ok ${d}`));
          });
          socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
        });
      try {
        expect(await dial('eventstore')).toBe('ok ok');
        expect(await dial('elsewhere')).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
      } finally {
        server.close();
      }
      // A second run (the stack restarted) keeps the CA the clients trust.
      execFileSync('sh', [join(root, 'scripts/eventstore-certs.sh'), dir], { stdio: 'pipe' });
      expect(readFileSync(join(dir, 'ca/ca.crt'))).toEqual(ca);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the profile ha of docker-compose.yml', () => {
  const NODES = ['eventstore-1', 'eventstore-2', 'eventstore-3'];
  const HA = [
    'certs-ha',
    ...NODES,
    'postgres-primary',
    'postgres-standby',
    ...[1, 2, 3, 4, 5, 6].map((i) => `redis-${i}`),
    'redis-cluster-init',
    'gateway-ha',
    'worker-ha',
  ];

  it('adds its services under the profile only, leaving the default ones to start without it', () => {
    const services = compose();
    expect(Object.keys(services).filter((name) => services[name].profiles?.includes('ha'))).toEqual(HA);
    for (const name of ['certs', 'eventstore', 'postgres', 'redis', 'gateway', 'worker']) expect([name, services[name].profiles]).toEqual([name, undefined]);
  });

  it('runs three EventStoreDB nodes that seed gossip with the two others and advertise the name on their own certificate', () => {
    const services = compose();
    for (const node of NODES) {
      const env = services[node].environment!;
      expect(services[node].image).toBe('eventstore/eventstore:24.10');
      expect(env).toMatchObject({ EVENTSTORE_CLUSTER_SIZE: '3', EVENTSTORE_DISCOVER_VIA_DNS: 'false', EVENTSTORE_INSECURE: 'false' });
      expect(env.EVENTSTORE_GOSSIP_SEED.split(',').sort()).toEqual(NODES.filter((n) => n !== node).map((n) => `${n}:2113`));
      expect([env.EVENTSTORE_NODE_HOST_ADVERTISE_AS, env.EVENTSTORE_REPLICATION_HOST_ADVERTISE_AS, services[node].hostname]).toEqual([node, node, node]);
      expect(env.EVENTSTORE_CERTIFICATE_FILE).toBe(`/etc/eventstore/certs/${node}/node.crt`);
      expect(env.EVENTSTORE_DEFAULT_ADMIN_PASSWORD).toMatch(/^\$\{EVENTSTORE_ADMIN_PASSWORD:\?/);
    }
    expect(services['certs-ha'].command!.join(' ')).toContain(`eventstore-certs.sh --nodes /certs ${NODES.join(' ')}`);
  });

  it('connects its gateway and worker to the cluster by its seeds, on the leader, trusting its CA, and to the replicated PostgreSQL and Redis', () => {
    const services = compose();
    for (const name of ['gateway-ha', 'worker-ha']) {
      const env = services[name].environment!;
      const url = parseEventStoreUrl(env.EVENTSTORE_URL.replace('${EVENTSTORE_ADMIN_PASSWORD}', 'pw').replace(/tlsCAFile=[^&]*/, `tlsCAFile=${__filename}`));
      expect(url).toMatchObject({ cluster: true, nodePreference: 'leader', tls: true, hosts: NODES.map((host) => ({ host, port: 2113 })) });
      expect(env.EVENTSTORE_URL).toContain('tlsCAFile=/etc/eventstore/certs/ca/ca.crt');
      // One host: node-postgres reads no list, and the configuration refuses one.
      expect(env.DATABASE_URL).toBe('postgres://svc:${POSTGRES_PASSWORD}@postgres-primary:5432/svc');
      expect(env.REDIS_CLUSTER_NODES).toBe('redis-1:6379,redis-2:6379,redis-3:6379,redis-4:6379,redis-5:6379,redis-6:6379');
      expect(env.REDIS_URL).toBe('');
    }
    expect(services['worker-ha'].environment!.SVC_METRICS_PORT).toBe('9464');
    expect(services['redis-1'].command!.join(' ')).toContain('--cluster-enabled yes');
    expect(services['redis-cluster-init'].command!.join(' ')).toContain('--cluster-replicas 1 --cluster-yes');
    expect(services['postgres-primary'].command!.join(' ')).toContain('synchronous_standby_names=ANY 1 (standby)');
    expect(services['postgres-standby'].command!.join(' ')).toMatch(/pg_basebackup[\s\S]* -R -X stream[\s\S]*cluster_name=standby/);
  });

  it('makes one certificate per node, each accepted for its own name and no other by a client trusting only the CA', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-esdb-certs-'));
    try {
      execFileSync('sh', [join(root, 'scripts/eventstore-certs.sh'), '--nodes', dir, ...NODES], { stdio: 'pipe' });
      const ca = readFileSync(join(dir, 'ca/ca.crt'));
      for (const node of NODES) {
        expect(statSync(join(dir, node, 'node.key')).mode & 0o077).toBe(0);
        const server = createServer({ cert: readFileSync(join(dir, node, 'node.crt')), key: readFileSync(join(dir, node, 'node.key')) }, (socket) =>
          socket.end('ok'),
        );
        server.listen(0, '127.0.0.1');
        await once(server, 'listening');
        const port = (server.address() as AddressInfo).port;
        const dial = (servername: string) =>
          new Promise<string>((resolve) => {
            const socket = connect({ host: '127.0.0.1', port, servername, ca }, () => socket.once('data', (d) => resolve(`ok ${d}`)));
            socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
          });
        try {
          expect(await dial(node)).toBe('ok ok');
          expect(await dial(NODES.find((other) => other !== node)!)).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
        } finally {
          server.close();
        }
      }
      // The CA key is gone: a run that would need a new node certificate refuses rather than
      // make a CA the others do not share; a rerun with the same nodes keeps everything.
      expect(() => execFileSync('sh', [join(root, 'scripts/eventstore-certs.sh'), '--nodes', dir, 'eventstore-4'], { stdio: 'pipe' })).toThrow();
      execFileSync('sh', [join(root, 'scripts/eventstore-certs.sh'), '--nodes', dir, ...NODES], { stdio: 'pipe' });
      expect(readFileSync(join(dir, 'ca/ca.crt'))).toEqual(ca);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
