import { Controller, Get, Inject, Param, Query, UseGuards } from '@nestjs/common';
import type { CatalogModel } from '@svc/catalog';
import { CATALOG, type Catalog, isRetired, modelNotFound } from '@svc/catalog';
import { assertModelAllowed, type Caller } from '@svc/identity';
import { CLOCK, type Clock } from '@svc/platform';
import { ApiKeyGuard, CallerParam, Requires } from '../http/auth.guard';
import { matchesFilters, parseModelFilters } from './model-filters';
import { presentModel, presentModelWithProviders } from './model.presenter';

/** Spec 4.17: the catalog as the calling key sees it; any key scope may read it. */
@Controller('v1/models')
@UseGuards(ApiKeyGuard)
@Requires('lookup')
export class ModelsController {
  constructor(
    @Inject(CATALOG) private readonly catalog: Catalog,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  @Get()
  list(@CallerParam() caller: Caller, @Query() query: Record<string, unknown>) {
    const now = this.clock.now();
    return { object: 'list', data: this.listed(caller, query, now).map((m) => presentModel(m, now)) };
  }

  @Get('count')
  count(@CallerParam() caller: Caller, @Query() query: Record<string, unknown>) {
    return { data: { count: this.listed(caller, query, this.clock.now()).length } };
  }

  /**
   * Ids contain "/" (`sim/echo`), so the id is the rest of the path; the router decodes it, so
   * the `sim%2Fecho` that SDKs send works too. A retired model is still shown here (deprecated,
   * with its sunset and replacement) so a client holding its id learns what to use instead.
   */
  @Get('*')
  get(@CallerParam() caller: Caller, @Param('*') id: string) {
    const model = this.catalog.get(id);
    if (!model) throw modelNotFound(id);
    assertModelAllowed(caller, id);
    return presentModelWithProviders(model, this.clock.now());
  }

  /** Only models the key may use, and not those past their sunset: they no longer answer themselves. */
  private listed(caller: Caller, query: Record<string, unknown>, now: Date): CatalogModel[] {
    const filters = parseModelFilters(query);
    return this.catalog.models.filter(
      (m) => (!caller.allowed_models || caller.allowed_models.includes(m.id)) && !isRetired(m, now) && matchesFilters(m, filters),
    );
  }
}
