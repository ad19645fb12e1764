import { Module } from '@nestjs/common';
import { ReadYourWritesModule } from '@svc/projections';
import { Metering } from './metering.service';
import { TokenWindows } from './token-windows';

/**
 * The metered pipeline of a process that calls models. Needs the command bus (CqrsModule) with
 * the ledger's handlers, and the runtime's parts by their tokens (config, catalog, clock, read
 * database, provider clients, simulator URL, serving lease, metrics, tracing, edge stores,
 * projections), which a composition root provides.
 */
@Module({
  imports: [ReadYourWritesModule],
  providers: [Metering, TokenWindows],
  exports: [Metering, TokenWindows],
})
export class MeteringModule {}
