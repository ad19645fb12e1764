import { Inject, Injectable, Logger } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { randomBytes } from 'node:crypto';
import type { CatalogModel } from '../../../../libs/catalog/src/catalog';
import { assertModelAllowed, modelNotFound, type Caller } from '../../../../libs/identity/src/authenticate';
import type { GenerationStats } from '../../../../libs/ledger/src/account';
import { LedgerCommand } from '../../../../libs/ledger/src/ledger.module';
import { costOfUsage, worstCaseCost } from '../../../../libs/ledger/src/pricing';
import { ApiError } from '../../../../libs/platform/src/errors';
import { nanoToUsd } from '../../../../libs/platform/src/money';
import type { ChatCompletion } from '../../../../libs/providers/src/wire';
import { countChatPromptTokens } from '../../../../libs/providers/src/tokens';
import type { Runtime } from '../../../../src/runtime';
import { ReadYourWrites } from '../account/read-your-writes';
import { RUNTIME } from '../../../../src/runtime.module';
import type { ChatCompletionRequest } from './chat-completion.request';

const ENDPOINT = '/v1/chat/completions';
/** A hold nobody settles (crash) outlives the upstream timeout by this much before expiry. */
const HOLD_GRACE_MS = 15 * 60_000;

export interface RequestContext {
  /** X-Client-Request-Id (spec 4): echoed back and stored on the generation. */
  clientRequestId?: string;
}

export interface ChatCompletionResponse {
  generationId: string;
  body: Omit<ChatCompletion, 'usage'> & { usage: Record<string, unknown> & { cost: number } };
}

/** ARCHITECTURE section 5, steps 3 and 7-10, for a non-streamed chat completion. */
@Injectable()
export class ChatCompletionsService {
  private readonly logger = new Logger('chat');

  constructor(
    @Inject(RUNTIME) private readonly runtime: Runtime,
    private readonly commands: CommandBus,
    private readonly reads: ReadYourWrites,
  ) {}

  async create(caller: Caller, request: ChatCompletionRequest, context: RequestContext = {}): Promise<ChatCompletionResponse> {
    const model = this.resolveModel(caller, request.model);
    const generationId = `gen-${randomBytes(12).toString('hex')}`;
    // Ids, not content: the end user's id and the client's request id go with the events.
    const user = request.safety_identifier ?? request.user;
    const metadata = {
      actor: `key:${caller.keyId}`,
      correlationId: generationId,
      ...(context.clientRequestId ? { client_request_id: context.clientRequestId } : {}),
      ...(typeof user === 'string' ? { user } : {}),
    };
    const ledger = (command: LedgerCommand['command']) => this.commands.execute(new LedgerCommand(caller.accountId, command, metadata));

    // Step 7, spec 1 rule 1: hold the worst case before anything is spent.
    const maxOutput = request.max_completion_tokens ?? request.max_tokens ?? null;
    const worstCase = worstCaseCost(countChatPromptTokens(request.messages), maxOutput, model.prices);
    const placed = await ledger({
      type: 'PlaceHold',
      holdId: generationId,
      keyId: caller.keyId,
      amountNano: worstCase,
      model: model.id,
      endpoint: ENDPOINT,
      ttlMs: this.runtime.config.upstreamTimeoutMs + HOLD_GRACE_MS,
      // Spec 2.2 and 3.3: the key's spend limit is checked inside the same decision.
      keyLimit: caller.limit_nano === null ? null : { limitNano: BigInt(caller.limit_nano), reset: caller.limit_reset },
    });
    this.reads.wrote(caller.accountId, placed.appended?.position);

    // Step 8.
    const route = model.providers[0];
    const provider = this.runtime.providers.get(route.provider.name);
    if (!provider) throw ApiError.internal(`provider ${route.provider.name} is not configured`);
    const started = performance.now();
    let result;
    try {
      result = await provider.chatCompletion({ ...request, model: route.upstreamModel, stream: false });
    } catch (err) {
      // Spec 1 rule 3: a request that ends in an error is not billed.
      const status = (err as { status?: unknown }).status;
      const released = await ledger({
        type: 'ReleaseHold',
        holdId: generationId,
        errorCode: typeof status === 'number' ? `upstream_${status}` : 'upstream_error',
        stats: { model: model.id, provider: route.provider.name, endpoint: ENDPOINT, latency_ms: Math.round(performance.now() - started) },
      });
      this.reads.wrote(caller.accountId, released.appended?.position);
      throw err;
    }

    // Step 9: charge the actual cost, or nothing for zero completion tokens (spec 1 rule 3).
    const stats: GenerationStats = {
      model: model.id,
      provider: route.provider.name,
      endpoint: ENDPOINT,
      prompt_tokens: result.usage.promptTokens,
      completion_tokens: result.usage.completionTokens,
      cached_tokens: result.usage.cachedTokens,
      reasoning_tokens: result.usage.reasoningTokens,
      latency_ms: Math.round(result.latencyMs),
      ttft_ms: null,
    };
    const settled = await ledger({ type: 'ChargeUsage', holdId: generationId, amountNano: costOfUsage(result.usage, model.prices), stats });
    this.reads.wrote(caller.accountId, settled.appended?.position);
    const charged = settled.events[0]?.type === 'UsageCharged' ? BigInt(settled.events[0].data.amount_nano) : 0n;

    // Step 10, spec 1 rule 2: our id, the model that answered, and the cost charged.
    const upstream = result.response;
    return {
      generationId,
      body: { ...upstream, id: generationId, model: model.id, usage: { ...(upstream.usage ?? {}), cost: nanoToUsd(charged) } },
    };
  }

  private resolveModel(caller: Caller, id: string): CatalogModel {
    const model = this.runtime.catalog.get(id);
    if (!model || model.type !== 'chat') throw modelNotFound(id);
    assertModelAllowed(caller, id);
    return model;
  }
}
