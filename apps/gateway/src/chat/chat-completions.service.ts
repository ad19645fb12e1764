import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { CatalogRoute } from '../../../../libs/catalog/src/catalog';
import type { Caller } from '../../../../libs/identity/src/authenticate';
import { resolveModel } from '../../../../libs/catalog/src/deprecation';
import { ProviderStats } from '../../../../libs/catalog/src/provider-stats';
import { parseModelId, parseProviderPreferences, requestParameters, routeTargets, suffixFields } from '../../../../libs/catalog/src/routing';
import type { Handled } from '../../../../libs/eventstore/src/aggregate-store';
import type { AccountCommand, AccountEvent, AccountState, GenerationStats } from '../../../../libs/ledger/src/account';
import { LedgerCommand } from '../../../../libs/ledger/src/ledger.module';
import { forgetProgress, PROGRESS_INTERVAL_MS, recordProgress } from '../../../../libs/projections/src/in-flight';
import type { TokenUsage } from '../../../../libs/ledger/src/pricing';
import { ApiError, isConnectionFailure } from '../../../../libs/platform/src/errors';
import { DomainError } from '../../../../libs/eventstore/src/decider';
import { nanoToUsd, type Nano } from '../../../../libs/platform/src/money';
import { normalizeUsage } from '../../../../libs/providers/src/openai-compatible';
import { ProviderError } from '../../../../libs/providers/src/provider-error';
import { countChatPromptTokens, countTextTokens } from '../../../../libs/providers/src/tokens';
import type { ChatCompletion, ChatUsage, EmbeddingsResponse } from '../../../../libs/providers/src/wire';
import type { EmbeddingsCall } from '../../../../libs/interfaces/src/embeddings';
import type { Runtime } from '../../../../src/runtime';
import { RUNTIME } from '../../../../src/runtime.module';
import { ReadYourWrites } from '../account/read-your-writes';
import { RateLimitService, tokenWindowHeaders } from '../edge/rate-limits';
import { byokKeyRejected, toApiError } from '../http/error-mapping';
import { markFailedGeneration } from '../http/failed-generation';
import type { ChatCompletionRequest } from './chat-completion.request';
import { fitContext, readPlugins, type ChatPlugins } from './plugins/chat-plugins';
import { checkCapabilities, checkImages, ignoredParamsHeader, withoutUnknownFields } from './request-rules';
import { ChatChunkEncoder, ChatStreamRelay, openStream, type Delivered, type StreamEncoder, type StreamOutcome } from './chat-stream';
import { allFailed, costOf, OwnProviders, targetsOf, worstCaseOf, worthAnotherTry, type Failure, type RoutedModel, type Target } from './fallbacks';

const ENDPOINT = '/v1/chat/completions';
/** A hold nobody settles (crash) outlives the upstream timeout by this much before expiry. */
const HOLD_GRACE_MS = 15 * 60_000;

export interface RequestContext {
  /** X-Client-Request-Id (spec 4): echoed back and stored on the generation. */
  clientRequestId?: string;
  /** The interface the request came through (/v1/messages...), recorded on the generation. */
  endpoint?: string;
}

export interface ChatCompletionResponse {
  generationId: string;
  /** Deprecation headers of the requested model (spec 9). */
  headers: Record<string, string>;
  body: Omit<ChatCompletion, 'usage'> & { usage: Record<string, unknown> & { cost: number } };
}

export interface EmbeddingsAnswer {
  generationId: string;
  headers: Record<string, string>;
  body: EmbeddingsResponse & { id: string; usage: { prompt_tokens: number; total_tokens: number; cost: number } };
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
export type EncoderFactory = (generation: { id: string; model: string; promptTokens: number }) => StreamEncoder;

const chatEncoder =
  (request: ChatCompletionRequest): EncoderFactory =>
  (generation) =>
    new ChatChunkEncoder(generation, request.stream_options?.include_usage === true);

/** What a request needs held: the models that may answer, its prompt and output cap. */
interface Plan {
  models: RoutedModel[];
  /** Deprecation headers of the requested model. */
  headers: Record<string, string>;
  promptTokens: number;
  /** null: the default worst case of 4,096 output tokens (spec 1 rule 1); 0 for embeddings. */
  maxOutput: number | null;
  /** The end user's id (safety_identifier / user), recorded with the events. */
  user: unknown;
}

/** One request from its hold to its settlement. */
interface Generation {
  id: string;
  caller: Caller;
  endpoint: string;
  /** The primary model, then the fallbacks, each through the providers routing chose, in order. */
  targets: Target[];
  /** The prompt as the gateway counts it: what is billed when the upstream never reported usage. */
  promptTokens: number;
  headers: Record<string, string>;
  ledger(command: AccountCommand): Promise<Handled<AccountState, AccountEvent>>;
  /** Whether a stream recorded its progress (issue 14.10): its row is dropped once settled. */
  progressRecorded?: boolean;
}

/** ARCHITECTURE section 5, steps 3 and 7-10, for a chat completion, streamed or not. */
@Injectable()
export class ChatCompletionsService implements BeforeApplicationShutdown {
  private readonly logger = new Logger('chat');
  /** Per process, like the rest of the routing state: a hint for `provider.sort` and `:nitro`. */
  private readonly providerStats = new ProviderStats();
  /** BYOK clients, per account and provider. */
  private readonly own: OwnProviders;
  /** Streams still running, whose clients may have left: a shutdown waits for them to settle. */
  private readonly settling = new Set<Promise<void>>();

  constructor(
    @Inject(RUNTIME) private readonly runtime: Runtime,
    private readonly commands: CommandBus,
    private readonly reads: ReadYourWrites,
    private readonly rateLimits: RateLimitService,
  ) {
    const { config } = runtime;
    this.own = new OwnProviders({ encryptionKey: config.encryptionKey, simulatorUrl: runtime.simulatorUrl ?? config.simulatorUrl, timeoutMs: config.upstreamTimeoutMs });
  }

  /**
   * Nest calls this on close, before the runtime (and its database pool) is closed: a stream
   * whose client left is still billed (spec 1 rule 4), so it is let finish rather than leave
   * its hold for the sweeper. Bounded by the upstream timeout.
   */
  async beforeApplicationShutdown(): Promise<void> {
    await Promise.allSettled([...this.settling]);
  }

  async create(caller: Caller, request: ChatCompletionRequest, context: RequestContext = {}): Promise<ChatCompletionResponse> {
    const generation = await this.beginChat(caller, request, context);
    const { target, value: result } = await this.firstAnswer(generation, (target) =>
      target.provider.chatCompletion({ ...upstreamBody(request, target), stream: false }),
    );
    this.measure(target, result.latencyMs, null, result.usage.completionTokens);

    // Step 9: charge the actual cost, or nothing for zero completion tokens (spec 1 rule 3).
    const charged = await this.charge(generation, target, result.usage, { latency_ms: Math.round(result.latencyMs), ttft_ms: null });

    // Step 10, spec 1 rule 2: our id, the model that answered, and the cost charged.
    const upstream = result.response;
    return {
      generationId: generation.id,
      headers: generation.headers,
      body: { ...upstream, id: generation.id, model: target.model.id, usage: { ...(upstream.usage ?? {}), cost: nanoToUsd(charged) } },
    };
  }

  /**
   * `POST /v1/embeddings` (spec 4.7): billed on input tokens (spec 1), through the same hold,
   * fallbacks across the model's providers, and settlement as chat. Nothing returned, nothing billed.
   */
  async embed(caller: Caller, call: EmbeddingsCall, context: RequestContext = {}): Promise<EmbeddingsAnswer> {
    const resolved = resolveModel(this.runtime.catalog, call.model, this.runtime.clock.now(), { allowedModels: caller.allowed_models, type: 'embedding' });
    const preferences = parseProviderPreferences(call.provider);
    const routes = routeTargets(resolved.model, { preferences, suffixes: [], parameters: requestParameters(call.body) }, this.providerStats);
    const models = [{ model: resolved.model, routes, fields: {} }];
    const generation = await this.begin(caller, { models, headers: resolved.headers, promptTokens: call.promptTokens, maxOutput: 0, user: call.body.user }, { ...context, endpoint: '/v1/embeddings' });
    const { target, value: result } = await this.firstAnswer(generation, (target) => target.provider.embeddings({ ...call.body, model: target.route.upstreamModel }));
    this.measure(target, result.latencyMs, null, 0);
    const promptTokens = result.usage.promptTokens > 0 ? result.usage.promptTokens : call.promptTokens;
    const usage = { promptTokens, completionTokens: 0, cachedTokens: 0, reasoningTokens: 0 };
    const charged = await this.charge(generation, target, usage, { latency_ms: Math.round(result.latencyMs), ttft_ms: null }, result.response.data.length);
    const upstream = result.response;
    return {
      generationId: generation.id,
      headers: generation.headers,
      body: { ...upstream, id: generation.id, model: target.model.id, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, cost: nanoToUsd(charged) } },
    };
  }

  /**
   * Resolves once the first output of some provider has arrived: until then every failure can
   * still fall back, and reaches the client as a JSON error with its status. From then on the
   * relay owns the generation, and settles it when the upstream is done, client or no client.
   */
  async stream(caller: Caller, request: ChatCompletionRequest, context: RequestContext = {}, encoder: EncoderFactory = chatEncoder(request)): Promise<ChatStreamResponse> {
    const generation = await this.beginChat(caller, request, context);
    const { target, value: opened } = await this.firstAnswer(generation, (target) =>
      openStream(target.provider.streamChatCompletion(upstreamBody(request, target))),
    );
    const relay = new ChatStreamRelay({
      id: generation.id,
      model: target.model.id,
      encoder: encoder({ id: generation.id, model: target.model.id, promptTokens: generation.promptTokens }),
      settle: (outcome) => this.settleStream(generation, target, outcome),
      errorEvent: (failure) => midStreamError(failure, this.runtime.clock.now()).toBody(),
      progress: (sofar) => this.recordProgress(generation, target, sofar),
      progressIntervalMs: PROGRESS_INTERVAL_MS,
    });
    const running = relay.run(opened).catch((err: unknown) => this.logger.error(`stream ${generation.id}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`));
    this.settling.add(running);
    void running.finally(() => this.settling.delete(running));
    return { generationId: generation.id, headers: generation.headers, body: relay.body, finished: relay.finished };
  }

  /**
   * Spec 4.2 rules 1, 4, 5 and 9, before the service holds anything: the request the service
   * gets (known fields only, plugin fields consumed, messages compressed to fit), the plugins
   * to apply to the answer, and the headers that report what was changed.
   */
  applyRules(caller: Caller, body: ChatCompletionRequest): { request: ChatCompletionRequest; plugins: ChatPlugins; headers: Record<string, string> } {
    const { known, ignored } = withoutUnknownFields(body);
    const plugins = readPlugins(known);
    // The models that may answer, resolved and routed exactly as the service will.
    const models = this.resolveModels(caller, known).models.map((m) => m.model);
    checkCapabilities(known, models);
    checkImages(known.messages);
    const maxOutput = known.max_completion_tokens ?? known.max_tokens ?? null;
    const fitted = fitContext(known.messages, models[0], maxOutput, plugins.compression);

    // The plugin fields are the gateway's own: an upstream router would apply them a second time.
    const { plugins: _plugins, transforms: _transforms, ...forwarded } = known;
    const headers: Record<string, string> = {};
    if (ignored.length > 0) headers['x-svc-ignored-params'] = ignoredParamsHeader(ignored);
    if (fitted.dropped > 0) headers['x-svc-compressed-messages'] = String(fitted.dropped);
    return { request: { ...forwarded, messages: fitted.messages } as ChatCompletionRequest, plugins, headers };
  }

  /** Steps 3 and 7 for a chat request: resolve every model of the request, then hold the worst case. */
  private beginChat(caller: Caller, request: ChatCompletionRequest, context: RequestContext): Promise<Generation> {
    const { models, headers } = this.resolveModels(caller, request);
    const user = request.safety_identifier ?? request.user;
    const maxOutput = request.max_completion_tokens ?? request.max_tokens ?? null;
    return this.begin(caller, { models, headers, promptTokens: countChatPromptTokens(request.messages), maxOutput, user }, context);
  }

  /** Step 7: hold the worst case of `plan` over every target that may answer it. */
  private async begin(caller: Caller, plan: Plan, context: RequestContext): Promise<Generation> {
    const { models, headers, promptTokens, maxOutput, user } = plan;
    // Spec 8: the prompt counts against the key's tokens per minute before anything is held.
    const tokens = await this.rateLimits.consumePromptTokens(caller, promptTokens);
    // BYOK: the account's own keys (read with the caller's key) replace the operator's for their providers.
    const targets = targetsOf(models, this.runtime.providers, this.own.resolver(caller.accountId, caller.sealedProviderKeys));
    const id = `gen-${randomBytes(12).toString('hex')}`;
    // Ids, not content: the end user's id and the client's request id go with the events.
    const metadata = {
      actor: `key:${caller.keyId}`,
      correlationId: id,
      ...(context.clientRequestId ? { client_request_id: context.clientRequestId } : {}),
      ...(typeof user === 'string' ? { user } : {}),
      // The process whose lease vouches for the hold: once it lapses, the hold is reaped.
      ...(this.runtime.gatewayLease ? { gateway: this.runtime.gatewayLease.id } : {}),
    };
    const ledger = async (command: AccountCommand) => {
      const handled = await this.commands.execute(new LedgerCommand(caller.accountId, command, metadata));
      this.reads.wrote(caller.accountId, handled.appended?.position);
      return handled;
    };

    // Spec 1 rule 1: hold the worst case before anything is spent. Any target may answer, so
    // the hold covers the dearest; it is held once and settled once. A BYOK target holds only its fee.
    const worstCase = targets.map((t) => worstCaseOf(t, promptTokens, maxOutput, this.runtime.config.byokFeePercent)).reduce((a, b) => (b > a ? b : a));
    const endpoint = context.endpoint ?? ENDPOINT;
    await ledger({
      type: 'PlaceHold',
      holdId: id,
      keyId: caller.keyId,
      amountNano: worstCase,
      model: models[0].model.id,
      endpoint,
      ttlMs: this.runtime.config.upstreamTimeoutMs + HOLD_GRACE_MS,
      // Spec 2.2 and 3.3: the key's spend limit is checked inside the same decision.
      keyLimit: caller.limit_nano === null ? null : { limitNano: BigInt(caller.limit_nano), reset: caller.limit_reset },
    });
    // Issue 15.3: the tokens left count this request's prompt (admission only looked at the window).
    return { id, caller, endpoint, targets, promptTokens, headers: { ...headers, ...tokenWindowHeaders(tokens) }, ledger };
  }

  /**
   * Step 8 with spec 4.2 rule 6: each target in turn until one answers. A provider-side failure
   * moves on; any other error, or the last failure, releases the hold (spec 1 rule 3: an error
   * is not billed) and is the answer.
   */
  private async firstAnswer<T>(generation: Generation, call: (target: Target) => Promise<T>): Promise<{ target: Target; value: T }> {
    const started = performance.now();
    const failures: Failure[] = [];
    for (const target of generation.targets) {
      try {
        return { target, value: await call(target) };
      } catch (err) {
        if (worthAnotherTry(err)) {
          failures.push({ target, error: err });
          this.logger.warn(`${generation.id}: ${target.model.id} via ${target.route.provider.name} failed (${err.message}); trying the next`);
          continue;
        }
        // Spec 7: a provider refusing the caller's own key is the caller's to fix. It is not
        // retried anywhere else: other providers or models would run on the operator's key at
        // full price, which is not what a BYOK account asked for.
        if (target.byok && err instanceof ProviderError && err.kind === 'http' && (err.status === 401 || err.status === 403)) {
          await this.release(generation, target, err, performance.now() - started, 'byok_key_rejected');
          throw markFailedGeneration(byokKeyRejected(err, target.route.provider.name), generation.id);
        }
        await this.release(generation, target, err, performance.now() - started);
        throw markFailedGeneration(err, generation.id);
      }
    }
    const last = failures[failures.length - 1];
    await this.release(generation, last.target, last.error, performance.now() - started);
    throw markFailedGeneration(allFailed(failures), generation.id);
  }

  private async release(generation: Generation, target: Target, err: unknown, latencyMs: number, errorCode?: string): Promise<void> {
    const status = err instanceof ProviderError ? err.status : undefined;
    await generation.ledger({
      type: 'ReleaseHold',
      holdId: generation.id,
      errorCode: errorCode ?? (status === undefined ? 'upstream_error' : `upstream_${status}`),
      stats: { ...this.who(generation, target), latency_ms: Math.round(latencyMs) },
    });
  }

  /**
   * Spec 1 rules 3 and 4 for a stream. A clean finish is billed from the upstream's usage; a
   * stream cut short only for what it delivered (the prompt as counted here, plus the tokens of
   * the text that arrived), and not at all when nothing arrived.
   */
  private async settleStream(generation: Generation, target: Target, outcome: StreamOutcome) {
    const usage = streamUsage(generation, outcome);
    if (outcome.failure !== null && usage.completionTokens === 0) {
      await settleDurably(() => this.release(generation, target, outcome.failure, outcome.latencyMs), async () => undefined);
      await this.forgetProgress(generation);
      return { ...wireUsage(usage), cost: 0 };
    }
    const timing = { latency_ms: outcome.latencyMs, ttft_ms: outcome.ttftMs };
    const charged = await settleDurably(
      () => this.charge(generation, target, usage, timing),
      // The attempt that lost its connection had committed after all: the hold is charged.
      async () => costOf(target, usage, this.runtime.config.byokFeePercent),
    );
    await this.forgetProgress(generation);
    // A stream cut short says nothing reliable about the provider's speed.
    if (outcome.failure === null) this.measure(target, outcome.latencyMs, outcome.ttftMs, usage.completionTokens);
    return { ...(outcome.usage ?? wireUsage(usage)), cost: nanoToUsd(charged) };
  }

  /**
   * What a running stream has delivered, priced as its charge would be, for the hold reaper to
   * charge should this process die before the stream settles.
   */
  private async recordProgress(generation: Generation, target: Target, sofar: StreamOutcome): Promise<void> {
    const usage = streamUsage(generation, sofar);
    if (usage.completionTokens === 0) return;
    const stats = { ...this.statsOf(generation, target, usage), latency_ms: sofar.latencyMs, ttft_ms: sofar.ttftMs };
    await recordProgress(this.runtime.sql, { holdId: generation.id, accountId: generation.caller.accountId, amountNano: costOf(target, usage, this.runtime.config.byokFeePercent), stats });
    generation.progressRecorded = true;
  }

  private async forgetProgress(generation: Generation): Promise<void> {
    if (!generation.progressRecorded) return;
    // A row left behind is harmless (its hold is settled) and pruned by the worker.
    await forgetProgress(this.runtime.sql, generation.id).catch((err: unknown) => this.logger.warn(`${generation.id}: progress not forgotten: ${(err as Error).message}`));
  }

  private statsOf(generation: Generation, target: Target, usage: TokenUsage) {
    return {
      ...this.who(generation, target),
      prompt_tokens: usage.promptTokens,
      completion_tokens: usage.completionTokens,
      cached_tokens: usage.cachedTokens,
      reasoning_tokens: usage.reasoningTokens,
    };
  }

  /** Charges `usage` at the prices of the model that answered; resolves with the amount charged. */
  private async charge(generation: Generation, target: Target, usage: TokenUsage, timing: Pick<GenerationStats, 'latency_ms' | 'ttft_ms'>, returned?: number): Promise<Nano> {
    const stats: GenerationStats = { ...this.statsOf(generation, target, usage), ...timing };
    const amountNano = costOf(target, usage, this.runtime.config.byokFeePercent);
    const settled = await generation.ledger({ type: 'ChargeUsage', holdId: generation.id, amountNano, stats, ...(returned === undefined ? {} : { returned }) });
    this.rateLimits
      .recordCompletionTokens(generation.caller, usage.completionTokens)
      .catch((err: unknown) => this.logger.warn(`${generation.id}: completion tokens not counted against the rate limit: ${(err as Error).message}`));
    return settled.events[0]?.type === 'UsageCharged' ? BigInt(settled.events[0].data.amount_nano) : 0n;
  }

  private measure(target: Target, latencyMs: number, ttftMs: number | null, completionTokens: number): void {
    this.providerStats.record(target.model.id, target.route.provider.name, { latencyMs, ttftMs, completionTokens });
  }

  /**
   * A BYOK generation records its provider as `<name>:byok`: GenerationStats has no field for it
   * yet, and the suffix keeps BYOK usage apart in the activity figures.
   */
  private who(generation: Generation, target: Target) {
    return { model: target.model.id, provider: target.byok ? `${target.route.provider.name}:byok` : target.route.provider.name, endpoint: generation.endpoint };
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
      const resolved = resolveModel(this.runtime.catalog, id, this.runtime.clock.now(), { allowedModels: caller.allowed_models, type: 'chat' });
      const fields = suffixFields(resolved.model, suffixes, request);
      let routes: readonly CatalogRoute[];
      try {
        routes = routeTargets(resolved.model, { preferences, suffixes, parameters }, this.providerStats);
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
        throw err instanceof ApiError && err.param === 'model' ? new ApiError(err.status, err.type, err.message, err.code, `models[${i}]`, err.headers) : err;
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

/** How often, and how long in all (about 30 s), a stream's settlement is retried while PostgreSQL is unreachable. */
const SETTLE_RETRIES = 9;

/**
 * A stream's settlement must land: its client has the output already, and a hold left open
 * would be released unbilled when it expires. While the database cannot be reached it is
 * retried with backoff; an attempt that lost its connection may have committed, so a hold
 * found no longer open on a retry is taken as settled by it (`landed`).
 */
async function settleDurably<T>(attempt: () => Promise<T>, landed: () => Promise<T>): Promise<T> {
  let unreachable = false;
  for (let i = 0; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (unreachable && err instanceof DomainError && err.code === 'hold_not_open') return landed();
      if (!isConnectionFailure(err) || i >= SETTLE_RETRIES) throw err;
      unreachable = true;
      await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** i, 5_000)));
    }
  }
}

/** A stream's usage: the upstream's report once it came, else what was delivered. */
function streamUsage(generation: Generation, outcome: StreamOutcome): TokenUsage {
  return outcome.usage ? normalizeUsage(outcome.usage) : deliveredUsage(generation.promptTokens, outcome.delivered);
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
