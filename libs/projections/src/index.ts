export * from './lag';
export * from './projection';
export * from './runner';
export type { ProjectionCaches } from './caches';
export { isPoisonError, type QuarantinedEvent } from './quarantine';
export { type AccountWrites, DEFAULT_REPLICA_WAIT_MS, ReadYourWrites, type ReplicaReads } from './read-your-writes';
export { chooseReadSource, type ReadSource, type ReadSourceState } from './read-source';
export { ReadYourWritesModule } from './read-your-writes.module';
export { ACCOUNT_WRITES, PROJECTIONS, REPLICA_READS } from './tokens';
