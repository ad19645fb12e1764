/** The model catalog of this process (a Catalog), for Nest injection. */
export const CATALOG = Symbol('CATALOG');
