/**
 * Nest injection tokens of the parts of a process's runtime that no library owns a token for:
 * a class takes the part it uses, never the whole runtime.
 */
/** The operator API's bearer token (string | null): null disables that API. */
export const ADMIN_TOKEN = Symbol('ADMIN_TOKEN');
/** Keys by secret hash (AuthCache | null): null where the process caches none. */
export const AUTH_CACHE = Symbol('AUTH_CACHE');
