import { Module, type DynamicModule } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { LedgerModule } from '@svc/ledger';
import type { Runtime } from '@svc/runtime';
import { RuntimeModule } from '@svc/runtime';
import { JobWorkModule } from '../../../src/job-work.module';

/**
 * The worker's command bus: background jobs decide through the same handlers as the gateway,
 * and batch lines run through the same pipeline and use cases.
 */
@Module({})
export class WorkerModule {
  static forRoot(runtime: Runtime): DynamicModule {
    return { module: WorkerModule, imports: [RuntimeModule.forRoot(runtime), CqrsModule.forRoot(), LedgerModule, JobWorkModule] };
  }
}
