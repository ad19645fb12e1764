import { Global, Module, type DynamicModule } from '@nestjs/common';
import { CATALOG } from '@svc/catalog';
import { AGGREGATE_STORE, EVENT_STORE } from '@svc/eventstore';
import { GATEWAY_LEASE, LEDGER_FORWARDER } from '@svc/ledger';
import { SERVICE_METRICS } from '@svc/metrics';
import { ACCOUNT_WRITES, PROJECTIONS, REPLICA_READS } from '@svc/projections';
import { accountStream } from '@svc/ledger';
import { CLOCK, CONFIG, EDGE_STORES, READ_DB, REPLICA_DB } from '@svc/platform';
import { PROVIDER_CLIENTS, SIMULATOR_URL } from '@svc/providers';
import { TRACING } from '@svc/telemetry';
import type { AccountWrites, ReplicaReads } from '@svc/projections';
import type { Runtime } from './runtime';
import { ADMIN_TOKEN, AUTH_CACHE } from './tokens';

/** Exposes the process's runtime (built outside Nest) to every module, one token per part. */
@Global()
@Module({})
export class RuntimeModule {
  static forRoot(runtime: Runtime): DynamicModule {
    const providers = [
      { provide: CONFIG, useValue: runtime.config },
      { provide: CLOCK, useValue: runtime.clock },
      { provide: READ_DB, useValue: runtime.sql },
      { provide: REPLICA_DB, useValue: runtime.replicaSql ?? runtime.sql },
      { provide: REPLICA_READS, useValue: replicaReads(runtime) },
      { provide: ACCOUNT_WRITES, useValue: accountWrites(runtime) },
      { provide: EVENT_STORE, useValue: runtime.store },
      { provide: AGGREGATE_STORE, useValue: runtime.aggregates },
      { provide: CATALOG, useValue: runtime.catalog },
      { provide: PROJECTIONS, useValue: runtime.projections },
      { provide: ADMIN_TOKEN, useValue: runtime.adminToken },
      { provide: EDGE_STORES, useValue: runtime.edge },
      { provide: SERVICE_METRICS, useValue: runtime.metrics },
      { provide: AUTH_CACHE, useValue: runtime.authCache },
      { provide: PROVIDER_CLIENTS, useValue: runtime.providers },
      { provide: SIMULATOR_URL, useValue: runtime.simulatorUrl },
      { provide: GATEWAY_LEASE, useValue: runtime.gatewayLease },
      { provide: LEDGER_FORWARDER, useValue: runtime.peerLedger },
      { provide: TRACING, useValue: runtime.tracing },
    ];
    return { module: RuntimeModule, providers, exports: providers.map((p) => p.provide) };
  }
}

/** Where the log says an account was last written: one indexed read of the primary, the stream's last revision (events' primary key). */
function accountWrites({ store }: Runtime): AccountWrites {
  return { lastWrite: async (accountId) => (await store.readStream(accountStream(accountId), { direction: 'backwards', maxCount: 1 }))[0]?.position };
}

/** What ReadYourWrites needs to send pure reads to the standby; null without one. */
function replicaReads(runtime: Runtime): ReplicaReads | null {
  const { replicaSql, store, metrics } = runtime;
  if (!replicaSql) return null;
  return {
    replica: replicaSql,
    nudge: () => store.requestCatchUp(),
    answered: (source) => metrics.readModelReads.inc({ source }),
  };
}
