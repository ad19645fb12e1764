import type { Position } from '@svc/eventstore';

/**
 * Caches that readers keep of some read models (the gateways' authentication caches). A
 * projection's waitFor only says its rows are committed; a write that must be seen everywhere
 * at once (a revoked key) also needs every such cache to have let go of what it held before.
 */
export interface ProjectionCaches {
  /** The projections whose rows are cached. */
  readonly projections: ReadonlySet<string>;
  /**
   * Called once a batch that changed rows of one of them has committed, before this runner's
   * waitFor sees it. A failure is reported and otherwise ignored: the caches find out by
   * themselves, only later.
   */
  invalidate(): Promise<void>;
  /** Resolves once no cache can still answer with rows older than `position`. */
  settled(position: Position): Promise<void>;
}
