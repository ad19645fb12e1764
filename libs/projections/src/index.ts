export * from './lag';
export * from './projection';
export * from './runner';
export type { ProjectionCaches } from './caches';
export { isPoisonError, type QuarantinedEvent } from './quarantine';
export { ReadYourWrites } from './read-your-writes';
export { ReadYourWritesModule } from './read-your-writes.module';
export { PROJECTIONS } from './tokens';
