/** Nest injection tokens of shared infrastructure. */
export const CONFIG = Symbol('CONFIG');
/** The SqlRunner holding the read models. */
export const READ_DB = Symbol('READ_DB');
