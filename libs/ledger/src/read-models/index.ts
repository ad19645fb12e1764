import { activityProjection } from './activity';
import { creditsProjection } from './credits';
import { generationsProjection } from './generations';

export * from './activity';
export * from './credits';
export * from './generations';
export * from './queries.module';

/** The ledger's read models, for the composition root to hand to the projection runner. */
export const LEDGER_PROJECTIONS = [creditsProjection, generationsProjection, activityProjection];
