/**
 * What each route the gateway serves does, keyed "METHOD /path" exactly as Fastify registers it
 * (`:id`, `*`). The document's paths are the routes the app registered joined with these
 * (document.ts): a route missing here, or an entry no route matches, is reported, never dropped.
 */
import type { OperationDescription } from './operations/types';
import { TEXT_OPERATIONS } from './operations/text';
import { MEDIA_OPERATIONS } from './operations/media';
import { FILES_AND_BATCHES_OPERATIONS } from './operations/files-batches';
import { VIDEO_OPERATIONS } from './operations/videos';
import { MODELS_AND_PRESETS_OPERATIONS } from './operations/models-presets';
import { ACCOUNT_OPERATIONS } from './operations/account';
import { SETTINGS_OPERATIONS } from './operations/settings';
import { ORGANIZATION_OPERATIONS } from './operations/organizations';
import { GUARDRAIL_OPERATIONS } from './operations/guardrails';
import { OPERATOR_OPERATIONS } from './operations/operator';
import { SERVICE_OPERATIONS } from './operations/service';

export type { Access, OperationDescription, QueryParameter } from './operations/types';

export const OPERATIONS: Record<string, OperationDescription> = {
  ...TEXT_OPERATIONS,
  ...MEDIA_OPERATIONS,
  ...FILES_AND_BATCHES_OPERATIONS,
  ...VIDEO_OPERATIONS,
  ...MODELS_AND_PRESETS_OPERATIONS,
  ...ACCOUNT_OPERATIONS,
  ...SETTINGS_OPERATIONS,
  ...ORGANIZATION_OPERATIONS,
  ...GUARDRAIL_OPERATIONS,
  ...OPERATOR_OPERATIONS,
  ...SERVICE_OPERATIONS,
};
