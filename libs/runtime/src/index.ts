export { createRuntime, DataDirInUseError, embeddedDbDir, initContentTables, type Runtime, type RuntimeOptions } from './runtime';
export { RuntimeModule } from './runtime.module';
export { ADMIN_TOKEN, AUTH_CACHE } from './tokens';
export { ALL_PROJECTIONS } from './projections';
export { CONTENTION_HOLD_MS, neverSent, ONE_OWNER_KEY, PeerRouting, rendezvousScore } from './peer-routing';
export { MAX_PEER_BATCH, PeerLedger, type PeerLedgerOutcome } from './peer-ledger';
