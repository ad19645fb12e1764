import { activityProjection } from './read-models/activity';
import { auditLogProjection } from './read-models/audit-log';
import { creditsProjection } from './read-models/credits';
import { generationsProjection } from './read-models/generations';
import { identityProjection } from './read-models/identity';
import { keyUsageProjection } from './read-models/key-usage';
import { providerKeysProjection } from './read-models/provider-keys';
import { settingsProjection } from './read-models/settings';
import { notificationsProjection } from './read-models/notifications';
import { presetsProjection } from './read-models/presets';
import { batchesProjection } from './read-models/batches';
import { videosProjection } from './read-models/videos';

export * from './auth-cache';
export * from './in-flight';
export * from './lag';
export * from './projection';
export * from './runner';
export * from './read-models/activity';
export * from './read-models/audit-log';
export * from './read-models/credits';
export * from './read-models/generations';
export * from './read-models/identity';
export * from './read-models/key-usage';
export * from './read-models/provider-keys';
export * from './read-models/settings';
export * from './read-models/notifications';
export * from './read-models/presets';
export * from './read-models/batches';
export * from './read-models/videos';

/** Every projection of the service, in the order `projections status` lists them. */
export const ALL_PROJECTIONS = [
  identityProjection,
  creditsProjection,
  generationsProjection,
  keyUsageProjection,
  activityProjection,
  auditLogProjection,
  providerKeysProjection,
  settingsProjection,
  notificationsProjection,
  presetsProjection,
  batchesProjection,
  videosProjection,
];
export { GetActivityQuery, GetCreditsQuery, LookupGenerationsQuery, ProjectionQueriesModule } from './queries.module';
export { ReadYourWrites } from './read-your-writes';
export { PROJECTIONS } from './tokens';
