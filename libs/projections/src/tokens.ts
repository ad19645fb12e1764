/** The projection runner of this process, for reads that must see their own writes. */
export const PROJECTIONS = Symbol('PROJECTIONS');
/** What reads from the standby need (ReplicaReads), or null where DATABASE_READ_URL is unset. */
export const REPLICA_READS = Symbol('REPLICA_READS');
