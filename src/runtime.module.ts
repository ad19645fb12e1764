import { Global, Module, type DynamicModule } from '@nestjs/common';
import { CATALOG } from '@svc/catalog';
import { AGGREGATE_STORE, EVENT_STORE } from '@svc/eventstore';
import { PROJECTIONS } from '@svc/projections';
import { CLOCK, CONFIG, READ_DB } from '@svc/platform';
import type { Runtime } from './runtime';

export const RUNTIME = Symbol('RUNTIME');

/** Exposes the process's runtime (built outside Nest) to every module. */
@Global()
@Module({})
export class RuntimeModule {
  static forRoot(runtime: Runtime): DynamicModule {
    const providers = [
      { provide: RUNTIME, useValue: runtime },
      { provide: CONFIG, useValue: runtime.config },
      { provide: CLOCK, useValue: runtime.clock },
      { provide: READ_DB, useValue: runtime.sql },
      { provide: EVENT_STORE, useValue: runtime.store },
      { provide: AGGREGATE_STORE, useValue: runtime.aggregates },
      { provide: CATALOG, useValue: runtime.catalog },
      { provide: PROJECTIONS, useValue: runtime.projections },
    ];
    return { module: RuntimeModule, providers, exports: providers.map((p) => p.provide) };
  }
}
