import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import type { Readable } from 'node:stream';
import type { CatalogRoute } from '@svc/catalog';
import type { Caller } from '@svc/identity';
import { applyPreset, findPreset, openPresetConfig, presetReference, type PresetUse } from '@svc/presets';
import { CATALOG, type Catalog, parseModelId, parseProviderPreferences, requestParameters, resolveModel, routeTargets, suffixFields } from '@svc/catalog';
import { forgetProgress, PROGRESS_INTERVAL_MS, recordProgress } from '@svc/projections';
import type { TokenUsage } from '@svc/ledger';
import { ApiError, CLOCK, type Clock, CONFIG, type Config, type Nano, nanoToUsd, READ_DB, type SqlRunner } from '@svc/platform';
import {
  type Answered,
  costOfMeters,
  markFailedGeneration,
  type Metered,
  type MeterUsage,
  operationOf,
  type RequestTags,
  type ReserveOptions,
  type RoutedModel,
  settleDurably,
  type Settlement,
  type Target,
  tokenMeters,
  tokenWorstCase,
} from '@svc/metering';
import { countChatPromptTokens, countTextTokens, normalizeUsage, ProviderError } from '@svc/providers';
import type { ChatCompletion, ChatUsage, EmbeddingsResponse } from '@svc/providers';
import {
  chatAnnotations,
  type EmbeddingsCall,
  embedOperation,
  lastUserText,
  pageOf,
  searchBody,
  WEB_RESULT_TOKENS,
  webSearchMessage,
  webSearchPromptTokens,
  type WebSearchRun,
  withWebSearch,
} from '@svc/interfaces';
import { randomBytes } from 'node:crypto';
import { toApiError } from '../http/error-mapping';
import { Metering } from '../metering/metering.service';
import type { ChatCompletionRequest } from './chat-completion.request';
import { fitContext, readPlugins, type ChatPlugins, type WebPlugin } from './plugins/chat-plugins';
import { checkCapabilities, checkImages, ignoredParamsHeader, withoutUnknownFields } from './request-rules';
import { ChatChunkEncoder, ChatStreamRelay, openStream, type Delivered, type StreamEncoder, type StreamOutcome } from './chat-stream';

const ENDPOINT = '/v1/chat/completions';

export interface RequestContext extends RequestTags {
  /** The interface the request came through (/v1/messages...), recorded on the generation. */
  endpoint?: string;
  /** The preset the request used (spec 2.5), recorded on the generation. */
  preset?: PresetUse | null;
  /** Spec 4.2 rule 7: the web search to run before the model is called (as applyRules found it). */
  web?: WebSearch | null;
}

export interface ChatCompletionResponse {
  generationId: string;
  /** Deprecation headers of the requested model (spec 9). */
  headers: Record<string, string>;
  body: Omit<ChatCompletion, 'usage'> & { usage: Record<string, unknown> & { cost: number } };
  /** The web search the generation ran (spec 4.2 rule 7), for the interfaces that show it in their own shape. */
  webSearch: WebSearchRun | null;
}

export interface EmbeddingsAnswer {
  generationId: string;
  headers: Record<string, string>;
  body: EmbeddingsResponse & { id: string; usage: { prompt_tokens: number; total_tokens: number; cost: number } };
}

/** A call held and answered whose settlement is still to come (it will charge `MeteredCalls.chargeOf`), with its response. */
export interface AnsweredCall<Body> extends Omit<Answered<unknown>, 'answer'> {
  /** The response, given what the settlement charged. */
  present(charged: Nano): Body;
}

export interface ChatStreamResponse {
  generationId: string;
  /** Deprecation headers of the requested model (spec 9), sent before the first event. */
  headers: Record<string, string>;
  /** `text/event-stream` text, already flowing. */
  body: Readable;
  /** True once the stream finished cleanly and was billed; false when it was cut short. */
  finished: Promise<boolean>;
}

/** The wire format of a stream, made once the generation's id and answering model are known. */
export type EncoderFactory = (generation: {
  id: string;
  model: string;
  provider: string;
  promptTokens: number;
  webSearch: WebSearchRun | null;
}) => StreamEncoder;

const chatEncoder =
  (request: ChatCompletionRequest): EncoderFactory =>
  (generation) =>
    new ChatChunkEncoder(generation, request.stream_options?.include_usage === true);

/** One chat request from its hold to its settlement: the reservation and the prompt as counted here. */
interface Generation {
  metered: Metered;
  /** The request as it goes upstream: with the web search's results when one ran. */
  request: ChatCompletionRequest;
  webSearch: WebSearchRun | null;
  /** Searches billed on the generation (spec 4.2 rule 7): those that returned results. */
  searches: number;
  /** Whether a stream recorded its progress (issue 14.10): its row is dropped once settled. */
  progressRecorded?: boolean;
}

/** The engine of a web search: its routed providers, and the most one query may cost (the hold's figure). */
interface SearchEngine {
  models: RoutedModel[];
  maxPerQuery: bigint;
}

/** A request's web search: the plugin's options and the engine they chose, routed once. */
export interface WebSearch {
  plugin: WebPlugin;
  engine: SearchEngine;
}

/** ARCHITECTURE section 5, steps 3 and 7-10, for a chat completion, streamed or not, through the metering pipeline. */
@Injectable()
export class ChatCompletionsService implements BeforeApplicationShutdown {
  private readonly logger = new Logger('chat');
  /** Streams still running, whose clients may have left: a shutdown waits for them to settle. */
  private readonly settling = new Set<Promise<void>>();

  constructor(
    @Inject(CATALOG) private readonly catalog: Catalog,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CONFIG) private readonly config: Config,
    private readonly metering: Metering,
  ) {}

  /**
   * Nest calls this on close, before the runtime (and its database pool) is closed: a stream
   * whose client left is still billed (spec 1 rule 4), so it is let finish rather than leave
   * its hold for the sweeper. Bounded by the upstream timeout.
   */
  async beforeApplicationShutdown(): Promise<void> {
    await Promise.allSettled([...this.settling]);
  }

  async create(caller: Caller, request: ChatCompletionRequest, context: RequestContext = {}): Promise<ChatCompletionResponse> {
    return this.settled(await this.answer(caller, request, context));
  }

  /**
   * Steps 3 and 7-8 of a chat completion: held and answered, not yet settled. A batch line
   * keeps the answer and its settlement before it settles (ARCHITECTURE section 10).
   */
  async answer(
    caller: Caller,
    request: ChatCompletionRequest,
    context: RequestContext = {},
    options: ReserveOptions = {},
  ): Promise<AnsweredCall<ChatCompletionResponse>> {
    const generation = await this.beginChat(caller, request, context, options);
    const { target, value: result } = await this.metering.calls.attempt(generation.metered, (target) =>
      target.provider.chatCompletion({ ...upstreamBody(generation.request, target), stream: false }),
    );
    this.measure(target, result.latencyMs, null, result.usage.completionTokens);
    // Step 9's figures: the actual usage, nothing for zero completion tokens (spec 1 rule 3).
    const settlement: Settlement = { ...chatSettlement(result.usage, generation.searches), latencyMs: result.latencyMs, ttftMs: null };
    const { id } = generation.metered.reservation;
    const { webSearch } = generation;
    // Step 10, spec 1 rule 2: our id, the model that answered, and the cost charged.
    const present = (charged: Nano): ChatCompletionResponse => {
      const upstream = result.response;
      const choices = webSearch
        ? upstream.choices.map((choice) =>
            choice.index === 0 ? { ...choice, message: { ...choice.message, annotations: chatAnnotations(choice.message.content, webSearch) } } : choice,
          )
        : upstream.choices;
      return {
        generationId: id,
        headers: generation.metered.headers,
        // `provider` as OpenRouter names it: the catalog provider that answered (issue 41 item 4).
        body: {
          ...upstream,
          id,
          model: target.model.id,
          provider: target.route.provider.name,
          choices,
          usage: { ...(upstream.usage ?? {}), ...this.searchUsage(generation, target), cost: nanoToUsd(charged) },
        },
        webSearch,
      };
    };
    return { metered: generation.metered, target, settlement, present };
  }

  /**
   * `POST /v1/embeddings` (spec 4.7): billed on input tokens (spec 1), through the same
   * pipeline as chat: hold, fallbacks across the model's providers, settlement.
   */
  async embed(caller: Caller, call: EmbeddingsCall, context: RequestContext = {}): Promise<EmbeddingsAnswer> {
    return this.settled(await this.answerEmbeddings(caller, call, context));
  }

  /** Embeddings held and answered, not yet settled (see `answer`). */
  async answerEmbeddings(
    caller: Caller,
    call: EmbeddingsCall,
    context: RequestContext = {},
    options: ReserveOptions = {},
  ): Promise<AnsweredCall<EmbeddingsAnswer>> {
    const callContext = {
      model: call.model,
      provider: call.provider,
      body: call.body,
      user: call.body.user,
      clientRequestId: context.clientRequestId,
      idempotency: context.idempotency,
    };
    const { metered, target, answer, settlement } = await this.metering.answer(caller, embedOperation, call, callContext, options);
    const promptTokens = settlement.usage.input ?? 0;
    const { id } = metered.reservation;
    const present = (charged: Nano): EmbeddingsAnswer => ({
      generationId: id,
      headers: metered.headers,
      body: { ...answer.response, id, model: target.model.id, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, cost: nanoToUsd(charged) } },
    });
    return { metered, target, settlement, present };
  }

  /** Settles an answered call (step 9) and presents it with what was charged. */
  async settled<Body>(answered: AnsweredCall<Body>): Promise<Body> {
    return answered.present(await this.metering.calls.settle(answered.metered, answered.target, answered.settlement));
  }

  /**
   * Resolves once the first output of some provider has arrived: until then every failure can
   * still fall back, and reaches the client as a JSON error with its status. From then on the
   * relay owns the generation, and settles it when the upstream is done, client or no client.
   */
  async stream(
    caller: Caller,
    request: ChatCompletionRequest,
    context: RequestContext = {},
    encoder: EncoderFactory = chatEncoder(request),
  ): Promise<ChatStreamResponse> {
    const generation = await this.beginChat(caller, request, context);
    const { reservation } = generation.metered;
    const { target, value: opened } = await this.metering.calls.attempt(generation.metered, (target) =>
      openStream(target.provider.streamChatCompletion(upstreamBody(generation.request, target))),
    );
    const relay = new ChatStreamRelay({
      id: reservation.id,
      model: target.model.id,
      encoder: encoder({
        id: reservation.id,
        model: target.model.id,
        provider: target.route.provider.name,
        promptTokens: reservation.promptTokens,
        webSearch: generation.webSearch,
      }),
      settle: (outcome) => this.settleStream(generation, target, outcome),
      errorEvent: (failure) => midStreamError(failure, this.clock.now()).toBody(),
      progress: (sofar) => this.recordProgress(generation, target, sofar),
      progressIntervalMs: PROGRESS_INTERVAL_MS,
      stallMs: this.config.streamStallMs,
    });
    const running = relay
      .run(opened)
      .catch((err: unknown) => this.logger.error(`stream ${reservation.id}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`));
    this.settling.add(running);
    void running.finally(() => this.settling.delete(running));
    return { generationId: reservation.id, headers: generation.metered.headers, body: relay.body, finished: relay.finished };
  }

  /**
   * Spec 4.2 rules 1, 4, 5 and 9, before the service holds anything: the request the service
   * gets (known fields only, plugin fields consumed, messages compressed to fit), the plugins
   * to apply to the answer, and the headers that report what was changed.
   */
  applyRules(
    caller: Caller,
    sent: ChatCompletionRequest,
  ): { request: ChatCompletionRequest; plugins: ChatPlugins; headers: Record<string, string>; preset: PresetUse | null; web: WebSearch | null } {
    // Spec 2.5: a preset's settings first, so every rule below sees the request as it will run.
    const reference = presetReference(sent);
    const found = reference ? findPreset(reference, caller.presets) : null;
    // Issue 41 S4: the system prompt is sealed at rest; opened only to be applied.
    const stored =
      found && reference ? { ...found, config: openPresetConfig(found.config, this.config.encryptionKey, caller.workspaceId, reference.slug) } : null;
    const body = reference && stored ? (applyPreset(sent as unknown as Record<string, unknown>, reference, stored) as unknown as ChatCompletionRequest) : sent;
    const preset = reference && stored ? { slug: reference.slug, version: stored.version } : null;
    const { known, ignored } = withoutUnknownFields(body);
    const plugins = readPlugins(known, parseModelId(known.model).suffixes.includes('online'));
    // The models that may answer, resolved and routed exactly as the service will.
    const models = this.resolveModels(caller, known).models.map((m) => m.model);
    checkCapabilities(known, models);
    checkImages(known.messages);
    // The engine is routed now, so a mistake in it is a 4XX before anything is held.
    const web = plugins.web ? { plugin: plugins.web, engine: this.searchEngine(caller, plugins.web) } : null;
    const maxOutput = known.max_completion_tokens ?? known.max_tokens ?? null;
    const fitted = fitContext(known.messages, models[0], maxOutput, plugins.compression);

    // The plugin fields are the gateway's own: an upstream router would apply them a second time.
    // So is OpenRouter's `usage` (issue 41 item 1): the usage the client gets is the gateway's, with its cost.
    const { plugins: _plugins, transforms: _transforms, usage, ...forwarded } = known;
    const headers: Record<string, string> = {};
    if (ignored.length > 0) headers['x-svc-ignored-params'] = ignoredParamsHeader(ignored);
    if (fitted.dropped > 0) headers['x-svc-compressed-messages'] = String(fitted.dropped);
    const streamOptions = usage?.include === true && forwarded.stream === true ? { stream_options: { ...forwarded.stream_options, include_usage: true } } : {};
    return { request: { ...forwarded, ...streamOptions, messages: fitted.messages } as ChatCompletionRequest, plugins, headers, preset, web };
  }

  /** Steps 3 and 7 for a chat request: resolve every model of the request, then hold the worst case. */
  private async beginChat(caller: Caller, request: ChatCompletionRequest, context: RequestContext, options: ReserveOptions = {}): Promise<Generation> {
    const { models, headers } = this.resolveModels(caller, request);
    const web = context.web ?? null;
    // Spec 1 rule 1 with a web search: its results in the prompt (bounded) and one query at the dearest engine price.
    const promptTokens = countChatPromptTokens(request.messages) + (web ? webSearchPromptTokens(web.plugin.maxResults) : 0);
    const maxOutput = request.max_completion_tokens ?? request.max_tokens ?? null;
    const worstCase: MeterUsage = { ...tokenWorstCase(promptTokens, maxOutput), ...(web ? { queries: 1 } : {}) };
    const metered = await this.metering.calls.reserve(
      caller,
      {
        models: web ? models.map((m) => ({ ...m, toolPrices: { perQuery: web.engine.maxPerQuery } })) : models,
        headers,
        promptTokens,
        worstCase,
        endpoint: context.endpoint ?? ENDPOINT,
        user: request.safety_identifier ?? request.user,
        clientRequestId: context.clientRequestId,
        idempotency: context.idempotency,
        preset: context.preset ?? undefined,
      },
      options,
    );
    const generation: Generation = { metered, request, webSearch: null, searches: 0 };
    return web ? this.webSearch(caller, generation, web) : generation;
  }

  /**
   * Spec 4.2 rule 7, after the hold: one search for the last user message, on the engine's
   * providers in turn, its results given to the model before that message. The search is
   * billed (on this generation, at the price of the engine's provider that answered) only when
   * it found something. A search that fails releases the hold and fails the request, unbilled,
   * unless the plugin says `on_failure: "continue"`: then the model answers without it.
   */
  private async webSearch(caller: Caller, generation: Generation, { plugin: web, engine }: WebSearch): Promise<Generation> {
    const { calls } = this.metering;
    const { reservation } = generation.metered;
    const query = lastUserText(generation.request.messages).trim();
    const unpriced = { ...generation, metered: calls.withToolPrices(generation.metered, { perQuery: 0n }) };
    if (query === '') return unpriced;
    const started = performance.now();
    const tried = await calls.tryTargets(reservation.id, caller, engine.models, (target) => operationOf(target, 'search')(searchBody(query, web)));
    if (!tried.answered) {
      if (web.onFailure === 'continue') {
        this.logger.warn(`${reservation.id}: web search failed (${(tried.error as Error).message}); answering without it`);
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
    const messages = withWebSearch(
      generation.request.messages,
      webSearchMessage(run, this.clock.now(), web.searchPrompt) as ChatCompletionRequest['messages'][number],
    );
    return {
      ...generation,
      metered: calls.withToolPrices(generation.metered, { perQuery, costPerQuery }),
      request: { ...generation.request, messages },
      webSearch: run,
      searches: 1,
    };
  }

  /** The plugin's engine (or the catalog's default search engine the key may use), routed; its errors name the field that chose it. */
  private searchEngine(caller: Caller, web: WebPlugin): SearchEngine {
    try {
      const model = web.engine ?? this.metering.defaultModel(caller, 'search');
      const { models } = this.metering.route(caller, 'search', { model });
      const maxPerQuery = models[0].routes.reduce((max, route) => ((route.prices.perQuery ?? 0n) > max ? (route.prices.perQuery ?? 0n) : max), 0n);
      return { models, maxPerQuery };
    } catch (err) {
      throw ApiError.renamingParam(err, 'model', web.engineParam);
    }
  }

  /** Spec 4.2 rule 7 in `usage`: the searches billed and their cost (OpenRouter's server_tool_use, with the cost beside it). */
  private searchUsage(generation: Generation, target: Target): Record<string, unknown> {
    if (!generation.webSearch) return {};
    // Priced as the settlement prices them: the queries meter alone, on the target that answered.
    const cost = this.metering.calls.costOf(target, { queries: generation.searches });
    return { server_tool_use: { web_search_requests: generation.searches, web_search_cost: nanoToUsd(cost) } };
  }

  /**
   * Spec 1 rules 3 and 4 for a stream. A clean finish is billed from the upstream's usage; a
   * stream cut short only for what it delivered (the prompt as counted here, plus the tokens of
   * the text that arrived), and not at all when nothing arrived.
   */
  private async settleStream(generation: Generation, target: Target, outcome: StreamOutcome) {
    const { calls } = this.metering;
    const usage = streamUsage(generation, outcome);
    if (outcome.failure !== null && usage.completionTokens === 0) {
      await settleDurably(
        () => calls.release(generation.metered.reservation, target, outcome.failure, outcome.latencyMs),
        async () => undefined,
      );
      await this.forgetProgress(generation);
      return { ...wireUsage(usage), cost: 0 };
    }
    const settlement: Settlement = { ...chatSettlement(usage, generation.searches), latencyMs: outcome.latencyMs, ttftMs: outcome.ttftMs };
    // The client has the output: the charge lands, now or through the hold reaper (issue 41 A).
    const charged = await calls.settleDelivered(generation.metered, target, settlement);
    await this.forgetProgress(generation);
    // A stream cut short says nothing reliable about the provider's speed.
    if (outcome.failure === null) this.measure(target, outcome.latencyMs, outcome.ttftMs, usage.completionTokens);
    return { ...(outcome.usage ?? wireUsage(usage)), ...this.searchUsage(generation, target), cost: nanoToUsd(charged) };
  }

  /**
   * What a running stream has delivered, priced as its charge would be, for the hold reaper to
   * charge should this process die before the stream settles.
   */
  private async recordProgress(generation: Generation, target: Target, sofar: StreamOutcome): Promise<void> {
    const usage = streamUsage(generation, sofar);
    if (usage.completionTokens === 0) return;
    const { calls } = this.metering;
    const { reservation } = generation.metered;
    const settlement = chatSettlement(usage, generation.searches);
    const stats = { ...calls.statsOf(reservation, target, settlement), latency_ms: sofar.latencyMs, ttft_ms: sofar.ttftMs };
    await recordProgress(this.sql, { holdId: reservation.id, accountId: reservation.accountId, amountNano: calls.costOf(target, settlement.usage), stats });
    generation.progressRecorded = true;
  }

  private async forgetProgress(generation: Generation): Promise<void> {
    if (!generation.progressRecorded) return;
    const { id } = generation.metered.reservation;
    // A row left behind is harmless (its hold is settled) and pruned by the worker.
    await forgetProgress(this.sql, id).catch((err: unknown) => this.logger.warn(`${id}: progress not forgotten: ${(err as Error).message}`));
  }

  private measure(target: Target, latencyMs: number, ttftMs: number | null, completionTokens: number): void {
    this.metering.providerStats.record(target.model.id, target.route.provider.name, { latencyMs, ttftMs, completionTokens });
  }

  /**
   * The primary model, then the fallbacks of `models` (spec 4.2 rule 6), each known, allowed and
   * not retired (spec 9: a retired model answers through its replacement, or 410), with its
   * suffixes (spec 1) and the providers that `provider` (spec 4.2) leaves, in routing order.
   * The primary must have a matching provider (404 otherwise); a fallback model without one is
   * left out, since it could not answer under the caller's constraints anyway.
   */
  resolveModels(caller: Caller, request: ChatCompletionRequest): { models: RoutedModel[]; headers: Record<string, string> } {
    const preferences = parseProviderPreferences(request.provider);
    const parameters = requestParameters(request);
    const route = (requested: string, primary: boolean) => {
      const { id, suffixes } = parseModelId(requested);
      const resolved = resolveModel(this.catalog, id, this.clock.now(), { allowedModels: caller.allowed_models, type: 'chat' });
      const fields = suffixFields(resolved.model, suffixes, request);
      let routes: readonly CatalogRoute[];
      try {
        routes = routeTargets(resolved.model, { preferences, suffixes, parameters }, this.metering.providerStats);
      } catch (err) {
        if (primary || !(err instanceof ApiError && err.code === 'no_provider_available')) throw err;
        routes = [];
      }
      return { routed: { model: resolved.model, routes, fields }, headers: resolved.headers };
    };
    const primary = route(request.model, true);
    const models = [primary.routed];
    (request.models ?? []).forEach((id, i) => {
      let routed: RoutedModel;
      try {
        routed = route(id, false).routed;
      } catch (err) {
        // The same answer as for `model`, naming the entry of `models` at fault.
        throw ApiError.renamingParam(err, 'model', `models[${i}]`);
      }
      // Naming a model twice would only try the same providers again.
      if (routed.routes.length > 0 && !models.some((m) => m.model === routed.model)) models.push(routed);
    });
    return { models, headers: primary.headers };
  }
}

/**
 * What goes upstream: the request with this target's suffix fields, under the provider's own
 * model id. `provider` stays here: the gateway has routed already, and an upstream router would
 * read our provider names as its own.
 */
function upstreamBody(request: ChatCompletionRequest, target: Target): Record<string, unknown> {
  const { provider: _routed, ...rest } = request;
  return { ...rest, ...target.fields, model: target.route.upstreamModel };
}

/** A stream's usage: the upstream's report once it came, else what was delivered. */
function streamUsage(generation: Generation, outcome: StreamOutcome): TokenUsage {
  return outcome.usage ? normalizeUsage(outcome.usage) : deliveredUsage(generation.metered.reservation.promptTokens, outcome.delivered);
}

/** A chat answer's tokens as the pipeline bills them: by meter, with reasoning shown apart (spec 2.6), and its web searches (rule 7). */
function chatSettlement(usage: TokenUsage, searches: number): Pick<Settlement, 'usage' | 'reasoningTokens'> {
  return { usage: { ...tokenMeters(usage), ...(searches > 0 ? { queries: searches } : {}) }, reasoningTokens: usage.reasoningTokens };
}

/** What a stream cut short delivered, counted the way the simulator and OpenAI count output. */
function deliveredUsage(promptTokens: number, delivered: Delivered): TokenUsage {
  const reasoning = countTextTokens(delivered.reasoning);
  const tools = delivered.toolNames || delivered.toolArguments ? countTextTokens(delivered.toolNames) + countTextTokens(delivered.toolArguments) : 0;
  return {
    promptTokens,
    completionTokens: reasoning + countTextTokens(delivered.content) + tools,
    cachedTokens: 0,
    reasoningTokens: reasoning,
  };
}

function wireUsage(usage: TokenUsage): ChatUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens },
  };
}

/** The error event of a stream that broke off after its first byte. */
function midStreamError(failure: unknown, now: Date): ApiError {
  const mapped = toApiError(failure, now);
  if (!(failure instanceof ProviderError)) return mapped;
  return new ApiError(
    mapped.status,
    mapped.type,
    'The model provider broke off the stream: the answer above is incomplete, and only what was delivered is billed. Safe to retry.',
    mapped.code,
  );
}
