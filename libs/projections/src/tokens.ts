/** The projection runner of this process, for reads that must see their own writes. */
export const PROJECTIONS = Symbol('PROJECTIONS');
/** What reads from the standby need (ReplicaReads), or null where DATABASE_READ_URL is unset. */
export const REPLICA_READS = Symbol('REPLICA_READS');
/** Where the log says an account was last written, by any process (AccountWrites). */
export const ACCOUNT_WRITES = Symbol('ACCOUNT_WRITES');
