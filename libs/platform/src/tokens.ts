/** Nest injection tokens of shared infrastructure. */
export const CONFIG = Symbol('CONFIG');
/** The SqlRunner holding the read models. */
export const READ_DB = Symbol('READ_DB');
/** The rate limiter, idempotency store, response cache and admission (EdgeStores). */
export const EDGE_STORES = Symbol('EDGE_STORES');
