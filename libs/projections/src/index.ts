import { apiKeysProjection } from './read-models/api-keys';
import { creditsProjection } from './read-models/credits';
import { generationsProjection } from './read-models/generations';

export * from './projection';
export * from './runner';
export * from './read-models/api-keys';
export * from './read-models/credits';
export * from './read-models/generations';

/** Every projection of the service, in the order `projections status` lists them. */
export const ALL_PROJECTIONS = [apiKeysProjection, creditsProjection, generationsProjection];
