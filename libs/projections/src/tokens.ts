/** The projection runner of this process, for reads that must see their own writes. */
export const PROJECTIONS = Symbol('PROJECTIONS');
