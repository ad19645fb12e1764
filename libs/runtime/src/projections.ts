import { activityProjection, creditsProjection, generationsProjection } from '@svc/ledger';
import { videosProjection } from '@svc/videos';
import { batchesProjection } from '@svc/batches';
import { presetsProjection } from '@svc/presets';
import { budgetSpendProjection, guardrailsProjection } from '@svc/guardrails';
import { notificationsProjection } from '@svc/webhooks';
import { auditLogProjection, identityProjection, keyUsageProjection, providerKeysProjection, settingsProjection } from '@svc/identity';

/**
 * Every read model of the service, in the order `projections status` lists them. Each context
 * owns its own; the runner is handed this list here, so the projections library depends on none.
 */
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
  guardrailsProjection,
  budgetSpendProjection,
];
