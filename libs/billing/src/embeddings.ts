/** `POST /v1/embeddings` as a use case (spec 4.7): billed on input tokens (spec 1), through the pipeline's one-shot operation. */
import type { Caller } from '@svc/identity';
import { type EmbeddingsCall, embedOperation } from '@svc/interfaces';
import { answerOperation, type MeteredCalls, type ReserveOptions, type Routing } from '@svc/metering';
import { type Nano, nanoToUsd } from '@svc/platform';
import type { EmbeddingsResponse } from '@svc/providers';
import { type AnsweredCall, type CallTags, settled } from './answered';

export interface EmbeddingsAnswer {
  generationId: string;
  headers: Record<string, string>;
  body: EmbeddingsResponse & { id: string; usage: { prompt_tokens: number; total_tokens: number; cost: number } };
}

export class Embeddings {
  constructor(private readonly deps: { calls: MeteredCalls; routing: Routing }) {}

  /** Held, answered by the model's providers in turn (fallbacks), settled. */
  async create(caller: Caller, call: EmbeddingsCall, tags: CallTags = {}): Promise<EmbeddingsAnswer> {
    return settled(this.deps.calls, await this.answer(caller, call, tags));
  }

  /** Held and answered, not yet settled: a batch line keeps the answer and its settlement before it settles (ARCHITECTURE section 10). */
  async answer(caller: Caller, call: EmbeddingsCall, tags: CallTags = {}, options: ReserveOptions = {}): Promise<AnsweredCall<EmbeddingsAnswer>> {
    const context = {
      model: call.model,
      provider: call.provider,
      body: call.body,
      user: call.body.user,
      clientRequestId: tags.clientRequestId,
      idempotency: tags.idempotency,
      admission: tags.admission,
    };
    const { metered, target, answer, settlement } = await answerOperation(this.deps.calls, this.deps.routing, caller, embedOperation, call, context, options);
    const promptTokens = settlement.usage.input ?? 0;
    const { id } = metered.reservation;
    // Spec 1 rule 2: our id, the model that answered, and the cost charged.
    const present = (charged: Nano): EmbeddingsAnswer => ({
      generationId: id,
      headers: metered.headers,
      body: { ...answer.response, id, model: target.model.id, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, cost: nanoToUsd(charged) } },
    });
    return { metered, target, settlement, present };
  }
}
