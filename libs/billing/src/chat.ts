/**
 * `POST /v1/chat/completions` as a use case (ARCHITECTURE section 5, steps 3-4 and 7-10):
 * the request's rules and plan, the hold, the upstream call with fallbacks, and the settlement,
 * streamed or not. Messages, Responses and legacy completions run through it as well.
 */
import { type Catalog, type ModelPlan, parseModelId, planModels, type PlanRequest, type ProviderStats } from '@svc/catalog';
import { routingAccessOf } from '@svc/guardrails';
import type { Caller } from '@svc/identity';
import { chatAnnotations, webSearchPromptTokens } from '@svc/interfaces';
import {
  type MeteredCalls,
  MeteredStream,
  type MeterUsage,
  openStream,
  operationOf,
  type ReserveOptions,
  type Settlement,
  type StreamProgressStore,
  StreamRelay,
  type StreamSink,
  type Target,
  tokenSettlement,
  tokenWorstCase,
} from '@svc/metering';
import { type Clock, type Nano, nanoToUsd } from '@svc/platform';
import { applyPreset, findPreset, openPresetConfig, presetReference } from '@svc/presets';
import { countChatPromptTokens, healChoices, wantsJson } from '@svc/providers';
import { type AnsweredCall, type BilledAnswer, type CallTags, settled } from './answered';
import { guardChatMessages } from './chat-content';
import { ChatChunkEncoder } from './chat-encoder';
import { fitContext, readPlugins } from './chat-plugins';
import type { ChatCompletionResponse, ChatRequest, EncoderFactory, Generation, PreparedChat, StreamedChat } from './chat-request';
import { checkCapabilities, checkImages, ignoredParamsHeader, withoutUnknownFields } from './chat-rules';
import { runWebSearch, searchEngineOf, searchUsage, toolUsage } from './chat-web-search';

const ENDPOINT = '/v1/chat/completions';

export interface ChatDeps {
  calls: MeteredCalls;
  catalog: Catalog;
  clock: Clock;
  /** This process's routing figures: read by `provider.sort` and `:nitro`, fed by every answer. */
  providerStats: ProviderStats;
  /** The key preset system prompts are sealed with (issue 41 S4); null when none is configured. */
  encryptionKey(): Buffer | null;
  /** How long a client may leave a full stream unread before it is cut (issue 41 F). */
  streamStallMs: number;
  /** Where running streams record their progress (issue 14.10), every `progressIntervalMs`. */
  progress: StreamProgressStore;
  progressIntervalMs: number;
  /** The `{"error": {...}}` object a stream that broke off after its first byte ends with. */
  streamError(failure: unknown): object;
  log: { warn(message: string): void; error(message: string): void };
}

export class ChatCompletions {
  /** Streams still running, whose clients may have left: a shutdown waits for them to settle. */
  private readonly settling = new Set<Promise<void>>();

  constructor(private readonly deps: ChatDeps) {}

  /**
   * Resolves once every running stream has settled: a stream whose client left is still billed
   * (spec 1 rule 4), so a stopping process lets it finish rather than leave its hold for the
   * sweeper. Bounded by the upstream timeout.
   */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.settling]);
  }

  /**
   * The whole of `POST /v1/chat/completions`: the rules, then a stream into the sink `openSink`
   * opens, or the JSON answer (healed when the request asked for it, spec 4.2 rule 8).
   */
  async complete<S extends StreamSink>(caller: Caller, body: ChatRequest, tags: CallTags, openSink: () => S): Promise<BilledAnswer<S>> {
    const prepared = this.prepare(caller, body);
    if (prepared.request.stream === true) {
      const sink = openSink();
      const { generationId, headers, finished } = await this.stream(caller, prepared, tags, sink);
      return { generationId, headers: { ...prepared.headers, ...headers }, stream: { body: sink, finished } };
    }
    const { generationId, headers, body: response } = await this.create(caller, prepared, tags);
    // Spec 4.2 rule 8: streamed output has gone out piece by piece and cannot be healed.
    const json = prepared.plugins.healing && wantsJson(prepared.request.response_format) ? healChoices(response).completion : response;
    return { generationId, headers: { ...prepared.headers, ...headers }, json };
  }

  /**
   * Spec 4.2 rules 1, 4, 5 and 9, before anything is held: the request as it goes on (known
   * fields only, plugin fields consumed, messages compressed to fit), the plugins to apply to
   * the answer, the headers that report what was changed, and the plan of its models.
   */
  prepare(caller: Caller, sent: ChatRequest): PreparedChat {
    // Spec 2.5: a preset's settings first, so every rule below sees the request as it will run.
    const reference = presetReference(sent);
    const found = reference ? findPreset(reference, caller.presets) : null;
    // Issue 41 S4: the system prompt is sealed at rest; opened only to be applied.
    const stored =
      found && reference ? { ...found, config: openPresetConfig(found.config, this.deps.encryptionKey(), caller.workspaceId, reference.slug) } : null;
    const body = reference && stored ? (applyPreset(sent as unknown as Record<string, unknown>, reference, stored) as unknown as ChatRequest) : sent;
    const preset = reference && stored ? { slug: reference.slug, version: stored.version } : null;
    const { known, ignored } = withoutUnknownFields(body);
    const plugins = readPlugins(known, parseModelId(known.model).suffixes.includes('online'));
    // The models that may answer, resolved and routed once: the rules below and the hold read the same plan.
    const plan = this.plan(caller, known);
    const models = plan.models.map((m) => m.model);
    checkCapabilities(known, models);
    checkImages(known.messages);
    // Issue 44: after the access rules, before anything is held or sent: a blocked prompt costs nothing.
    const guarded = guardChatMessages(caller, known.messages);
    // The engine is routed now, so a mistake in it is a 4XX before anything is held.
    const web = plugins.web ? { plugin: plugins.web, engine: searchEngineOf(this.deps, caller, plugins.web) } : null;
    const maxOutput = known.max_completion_tokens ?? known.max_tokens ?? null;
    const fitted = fitContext(guarded.messages, models[0], maxOutput, plugins.compression);

    // The plugin fields are the gateway's own: an upstream router would apply them a second time.
    // So is OpenRouter's `usage` (issue 41 item 1): the usage the client gets is the gateway's, with its cost.
    const { plugins: _plugins, transforms: _transforms, usage, ...forwarded } = known;
    const headers: Record<string, string> = {};
    if (ignored.length > 0) headers['x-svc-ignored-params'] = ignoredParamsHeader(ignored);
    if (fitted.dropped > 0) headers['x-svc-compressed-messages'] = String(fitted.dropped);
    const streamOptions = usage?.include === true && forwarded.stream === true ? { stream_options: { ...forwarded.stream_options, include_usage: true } } : {};
    return {
      request: { ...forwarded, ...streamOptions, messages: fitted.messages },
      plugins,
      headers,
      preset,
      web,
      plan,
      guardrailFindings: guarded.findings,
    };
  }

  /**
   * The chat models a request may be answered by, with their providers in routing order (its
   * `model` with suffixes, presets applied already, its fallbacks in `models`, its `provider`
   * preferences), for this key at this time.
   */
  plan(caller: Caller, request: PlanRequest): ModelPlan {
    const { catalog, clock, providerStats } = this.deps;
    return planModels(catalog, request, {
      now: clock.now(),
      allowedModels: caller.allowed_models,
      type: 'chat',
      stats: providerStats,
      access: routingAccessOf(caller.guardrails),
    });
  }

  /** Settled and presented at once. */
  async create(caller: Caller, prepared: PreparedChat, tags: CallTags = {}): Promise<ChatCompletionResponse> {
    return settled(this.deps.calls, await this.answer(caller, prepared, tags));
  }

  /**
   * Steps 7-8 of a chat completion: held and answered, not yet settled. A batch line keeps the
   * answer and its settlement before it settles (ARCHITECTURE section 10).
   */
  async answer(caller: Caller, prepared: PreparedChat, tags: CallTags = {}, options: ReserveOptions = {}): Promise<AnsweredCall<ChatCompletionResponse>> {
    const generation = await this.begin(caller, prepared, tags, options);
    const { target, value: result } = await this.deps.calls.attempt(generation.metered, (target) =>
      operationOf(target, 'chat')({ ...upstreamBody(generation.request, target), stream: false }),
    );
    this.measure(target, result.latencyMs, null, result.usage.completionTokens);
    // Step 9's figures: the actual usage, nothing for zero completion tokens (spec 1 rule 3).
    const settlement: Settlement = { ...tokenSettlement(result.usage, toolUsage(generation)), latencyMs: result.latencyMs, ttftMs: null };
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
          usage: { ...(upstream.usage ?? {}), ...searchUsage(this.deps.calls, generation, target), cost: nanoToUsd(charged) },
        },
        webSearch,
      };
    };
    return { metered: generation.metered, target, settlement, present };
  }

  /**
   * Resolves once the first output of some provider has arrived: until then every failure can
   * still fall back, and reaches the client as a JSON error with its status. From then on the
   * relay owns the generation, writes it to `sink`, and settles it when the upstream is done,
   * client or no client.
   */
  async stream(
    caller: Caller,
    prepared: PreparedChat,
    tags: CallTags,
    sink: StreamSink,
    encoder: EncoderFactory = chatEncoder(prepared.request),
  ): Promise<StreamedChat> {
    const { calls, log } = this.deps;
    const generation = await this.begin(caller, prepared, tags);
    const { reservation } = generation.metered;
    const { target, value: opened } = await calls.attempt(generation.metered, (target) =>
      openStream(operationOf(target, 'chat_stream')(upstreamBody(generation.request, target))),
    );
    const billing = new MeteredStream(calls, generation.metered, target, { toolUsage: toolUsage(generation), progress: this.deps.progress, warn: log.warn });
    const relay = new StreamRelay(sink, {
      id: reservation.id,
      model: target.model.id,
      encoder: encoder({
        id: reservation.id,
        model: target.model.id,
        provider: target.route.provider.name,
        promptTokens: reservation.promptTokens,
        webSearch: generation.webSearch,
      }),
      settle: async (outcome) => {
        const bill = await billing.settle(outcome);
        if (bill.released) return { ...bill.wire, cost: 0 };
        // A stream cut short says nothing reliable about the provider's speed.
        if (outcome.failure === null) this.measure(target, outcome.latencyMs, outcome.ttftMs, bill.usage.completionTokens);
        return { ...bill.wire, ...searchUsage(this.deps.calls, generation, target), cost: nanoToUsd(bill.charged) };
      },
      errorEvent: (failure) => this.deps.streamError(failure),
      progress: (sofar) => billing.record(sofar),
      progressIntervalMs: this.deps.progressIntervalMs,
      stallMs: this.deps.streamStallMs,
    });
    const running = relay
      .run(opened)
      .catch((err: unknown) => log.error(`stream ${reservation.id}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`));
    this.settling.add(running);
    void running.finally(() => this.settling.delete(running));
    return { generationId: reservation.id, headers: generation.metered.headers, finished: relay.finished };
  }

  /** Step 7 for a chat request: hold the worst case of its planned models, then run its web search. */
  private async begin(caller: Caller, prepared: PreparedChat, tags: CallTags, options: ReserveOptions = {}): Promise<Generation> {
    const { request, web, plan } = prepared;
    // Spec 1 rule 1 with a web search: its results in the prompt (bounded) and one query at the dearest engine price.
    const promptTokens = countChatPromptTokens(request.messages) + (web ? webSearchPromptTokens(web.plugin.maxResults) : 0);
    const maxOutput = request.max_completion_tokens ?? request.max_tokens ?? null;
    const worstCase: MeterUsage = { ...tokenWorstCase(promptTokens, maxOutput), ...(web ? { queries: 1 } : {}) };
    const metered = await this.deps.calls.reserve(
      caller,
      {
        models: web ? plan.models.map((m) => ({ ...m, toolPrices: { perQuery: web.engine.maxPerQuery } })) : plan.models,
        headers: plan.headers,
        promptTokens,
        worstCase,
        endpoint: tags.endpoint ?? ENDPOINT,
        user: request.safety_identifier ?? request.user,
        clientRequestId: tags.clientRequestId,
        idempotency: tags.idempotency,
        admission: tags.admission,
        preset: prepared.preset ?? undefined,
      },
      prepared.guardrailFindings.length > 0 ? { ...options, guardrailFindings: prepared.guardrailFindings } : options,
    );
    const generation: Generation = { metered, request, webSearch: null, searches: 0 };
    return web ? runWebSearch(this.deps, caller, generation, web) : generation;
  }

  private measure(target: Target, latencyMs: number, ttftMs: number | null, completionTokens: number): void {
    this.deps.providerStats.record(target.model.id, target.route.provider.name, { latencyMs, ttftMs, completionTokens });
  }
}

const chatEncoder =
  (request: ChatRequest): EncoderFactory =>
  (generation) =>
    new ChatChunkEncoder(generation, request.stream_options?.include_usage === true);

/**
 * What goes upstream: the request with this target's suffix fields, under the provider's own
 * model id. `provider` stays here: the gateway has routed already, and an upstream router would
 * read our provider names as its own.
 */
function upstreamBody(request: ChatRequest, target: Target): Record<string, unknown> {
  const { provider: _routed, ...rest } = request;
  return { ...rest, ...target.fields, model: target.route.upstreamModel };
}
