/**
 * Spec 4.2 rule 7: the web plugin of a chat request. Its engine is routed with the request's
 * rules, before anything is held; its one search runs after the hold, and is billed on the
 * generation beside its tokens when it found something.
 */
import { randomBytes } from 'node:crypto';
import { defaultModelOf } from '@svc/catalog';
import type { Caller } from '@svc/identity';
import { lastUserText, pageOf, searchBody, WEB_RESULT_TOKENS, webSearchMessage, type WebSearchRun, withWebSearch } from '@svc/interfaces';
import { costOfMeters, markFailedGeneration, type MeteredCalls, type MeterUsage, operationOf, routeOperation, type Routing, type Target } from '@svc/metering';
import { type Clock, nanoToUsd, renamingParam } from '@svc/platform';
import type { WebPlugin } from './chat-plugins';
import type { Generation, SearchEngine, WebSearch } from './chat-request';

/** What running a search needs: the pipeline its engine is called through, the clock its results are dated by, and a log. */
export interface WebSearchDeps {
  calls: MeteredCalls;
  clock: Clock;
  log: { warn(message: string): void };
}

/** The plugin's engine (or the catalog's default search engine the key may use), routed; its errors name the field that chose it. */
export function searchEngineOf(routing: Routing, caller: Caller, web: WebPlugin): SearchEngine {
  try {
    const model = web.engine ?? defaultModelOf(routing.catalog, 'search', caller.allowed_models);
    const { models } = routeOperation(routing, caller, 'search', { model });
    const maxPerQuery = models[0].routes.reduce((max, route) => ((route.prices.perQuery ?? 0n) > max ? (route.prices.perQuery ?? 0n) : max), 0n);
    return { models, maxPerQuery };
  } catch (err) {
    throw renamingParam(err, 'model', web.engineParam);
  }
}

/**
 * Spec 4.2 rule 7, after the hold: one search for the last user message, on the engine's
 * providers in turn, its results given to the model before that message. The search is
 * billed (on this generation, at the price of the engine's provider that answered) only when
 * it found something. A search that fails releases the hold and fails the request, unbilled,
 * unless the plugin says `on_failure: "continue"`: then the model answers without it.
 */
export async function runWebSearch(deps: WebSearchDeps, caller: Caller, generation: Generation, { plugin: web, engine }: WebSearch): Promise<Generation> {
  const { calls } = deps;
  const { reservation } = generation.metered;
  const query = lastUserText(generation.request.messages).trim();
  const unpriced = { ...generation, metered: calls.withToolPrices(generation.metered, { perQuery: 0n }) };
  if (query === '') return unpriced;
  const started = performance.now();
  const tried = await calls.tryTargets(reservation.id, caller, engine.models, (target) => operationOf(target, 'search')(searchBody(query, web)));
  if (!tried.answered) {
    if (web.onFailure === 'continue') {
      deps.log.warn(`${reservation.id}: web search failed (${(tried.error as Error).message}); answering without it`);
      return unpriced;
    }
    const primary = generation.metered.targets[0];
    await calls.release(reservation, primary, tried.cause, performance.now() - started, 'web_search_failed');
    throw markFailedGeneration(tried.error, reservation.id);
  }
  const hits = tried.value.results.slice(0, web.maxResults).map((hit) => pageOf(hit, WEB_RESULT_TOKENS));
  const run: WebSearchRun = { id: randomBytes(12).toString('hex'), query, engine: tried.target.model.id, hits };
  if (hits.length === 0) return { ...unpriced, webSearch: run };
  const perQuery = tried.target.route.prices.perQuery ?? 0n;
  // Issue 23: what the query costs the operator, recorded with the charge; null when the catalog does not say.
  const engineCost = tried.target.route.cost;
  const costPerQuery = engineCost ? costOfMeters({ queries: 1 }, engineCost) : null;
  const messages = withWebSearch(generation.request.messages, webSearchMessage(run, deps.clock.now(), web.searchPrompt));
  return {
    ...generation,
    metered: calls.withToolPrices(generation.metered, { perQuery, costPerQuery }),
    request: { ...generation.request, messages },
    webSearch: run,
    searches: 1,
  };
}

/** Spec 4.2 rule 7 in `usage`: the searches billed and their cost (OpenRouter's server_tool_use, with the cost beside it). */
export function searchUsage(calls: MeteredCalls, generation: Generation, target: Target): Record<string, unknown> {
  if (!generation.webSearch) return {};
  // Priced as the settlement prices them: the queries meter alone, on the target that answered.
  const cost = calls.costOf(target, { queries: generation.searches });
  return { server_tool_use: { web_search_requests: generation.searches, web_search_cost: nanoToUsd(cost) } };
}

/** The web searches a generation bills beside its tokens (spec 4.2 rule 7). */
export function toolUsage(generation: Generation): MeterUsage {
  return generation.searches > 0 ? { queries: generation.searches } : {};
}
