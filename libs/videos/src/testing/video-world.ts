import { AggregateStore, SqlEventStore } from '@svc/eventstore';
import { JobQueue } from '@svc/jobs';
import { type Clock, type SqlRunner } from '@svc/platform';
import { ProjectionRunner } from '@svc/projections';
import { VideoJobs } from '../jobs';
import { videosProjection } from '../read-models/videos';
import { memoryPglite } from '@svc/platform/testing/pglite';

export interface VideoWorld {
  sql: SqlRunner;
  store: SqlEventStore;
  runner: ProjectionRunner;
  aggregates: AggregateStore;
  jobs: VideoJobs;
}

/**
 * A real event store, videos read model and job table on PGlite, opened before and closed after
 * the enclosing describe block: what the video use cases run on in their specs.
 */
export function videoWorld(clock: Clock, key: Buffer): VideoWorld {
  const world = {} as VideoWorld;
  beforeAll(async () => {
    world.sql = await memoryPglite();
    world.store = new SqlEventStore(world.sql);
    await world.store.init();
    await JobQueue.init(world.sql);
    await VideoJobs.init(world.sql);
    world.runner = new ProjectionRunner(world.sql, world.store, [videosProjection], { idleMs: 20 });
    await world.runner.init();
    world.runner.start();
    world.aggregates = new AggregateStore(world.store, clock);
    world.jobs = new VideoJobs(world.sql, () => key);
  }, 60_000);
  afterAll(async () => {
    await world.runner?.stop();
    await world.store?.close();
    await world.sql?.close();
  });
  return world;
}
