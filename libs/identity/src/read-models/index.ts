import { auditLogProjection } from './audit-log';
import { identityProjection } from './identity';
import { keyUsageProjection } from './key-usage';
import { providerKeysProjection } from './provider-keys';
import { settingsProjection } from './settings';

export * from './audit-log';
export * from './identity';
export * from './key-usage';
export * from './provider-keys';
export * from './settings';

/** The read models of keys, organisations and account settings, for the composition root to hand to the projection runner. */
export const IDENTITY_PROJECTIONS = [identityProjection, keyUsageProjection, auditLogProjection, providerKeysProjection, settingsProjection];
