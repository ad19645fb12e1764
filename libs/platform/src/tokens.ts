/** Nest injection tokens of shared infrastructure. */
export const CONFIG = Symbol('CONFIG');
/** The SqlRunner holding the read models. */
export const READ_DB = Symbol('READ_DB');
/**
 * The SqlRunner on the hot standby (DATABASE_READ_URL) for pure read-model reads, READ_DB's own
 * runner when there is none. Never written through; which reads may use it: ReadYourWrites.readFrom.
 */
export const REPLICA_DB = Symbol('REPLICA_DB');
/** The rate limiter, idempotency store, response cache and admission (EdgeStores). */
export const EDGE_STORES = Symbol('EDGE_STORES');
