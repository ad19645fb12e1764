import type { Catalog, ModelType, ProviderStats } from '@svc/catalog';
import { parseProviderPreferences, requestParameters, resolveModel, routeTargetsWithin } from '@svc/catalog';
import { enforceGuardrailContent, routingAccessOf, type GuardrailContentFinding } from '@svc/guardrails';
import type { Caller } from '@svc/identity';
import type { Clock, Nano } from '@svc/platform';
import { ProviderError } from '@svc/providers';
import { markFailedGeneration } from './failed-generation';
import type { MeterUsage } from './meters';
import type { MeteredCalls } from './pipeline';
import type { Metered, Plan, PromptAdmission, ReserveOptions, Settlement } from './reservation';
import type { RoutedModel, Target } from './targets';

/**
 * A kind of billed call, declared once (ARCHITECTURE section 10): the model type it accepts,
 * its worst case (spec 1 rule 1), how one provider is called, what the answer used by meter,
 * and what "nothing returned" means for it (spec 1 rule 3).
 */
export interface Operation<Request, Answer> {
  /** The catalog type a model must have to serve it; another type is 400 model_type_mismatch. */
  readonly modelType: ModelType;
  /** The public endpoint, recorded on the generation. */
  readonly endpoint: string;
  /** The request's input as the gateway counts it, in tokens (spec 8: tokens per minute). */
  promptTokens(request: Request): number;
  worstCase(request: Request): MeterUsage;
  /** One call of one provider, under the provider's own model id. */
  call(target: Target, request: Request): Promise<Answer>;
  /** What the answer used, by meter; `target` is who answered (its prices decide, e.g., per image or per token). */
  usageOf(answer: Answer, request: Request, target: Target): MeterUsage;
  /** What the answer returned, in the operation's own unit; 0 is nothing, and is not billed. */
  returned(answer: Answer): number;
  /**
   * Issue 44: the request's prompt texts, read by the guardrails' content filters before anything
   * is held, and the request with them replaced (redacted); `param` is the field a refusal names.
   * Absent: the operation carries no prompt text (audio in, a stored file).
   */
  readonly prompt?: { param: string; texts(request: Request): string[]; withTexts(request: Request, texts: string[]): Request };
}

/**
 * The caller's guardrails' content filters over the operation's prompt: refused (400
 * `content_blocked`, 413), or the request to send on (redacted) and what was found.
 */
export function guardPrompt<Request>(
  caller: Caller,
  operation: Pick<Operation<Request, unknown>, 'prompt'>,
  request: Request,
): { request: Request; findings: GuardrailContentFinding[] } {
  const { prompt } = operation;
  if (!prompt || caller.guardrails.length === 0) return { request, findings: [] };
  const { texts, findings } = enforceGuardrailContent(caller.guardrails, prompt.texts(request), prompt.param);
  return { request: findings.some((f) => f.action === 'redact') ? prompt.withTexts(request, texts) : request, findings };
}

/** The parts of a request every operation reads: the model, routing preferences, ids for the record. */
export interface CallContext {
  model: string;
  /** Routing preferences (spec 4.2 `provider`). */
  provider?: unknown;
  /** The request body, whose fields decide which providers can serve it (`require_parameters`). */
  body?: Record<string, unknown>;
  user?: unknown;
  clientRequestId?: string;
  /** The request's Idempotency-Key, hashed, and body fingerprint (see Plan). */
  idempotency?: { key: string; fingerprint: string };
  /** The request's admission, made when its prompt is counted (see Plan). */
  admission?: PromptAdmission;
}

/** A call answered and not yet settled: what its settlement will charge is decided already. */
export interface Answered<Answer> {
  metered: Metered;
  target: Target;
  answer: Answer;
  settlement: Settlement;
}

export interface RunResult<Answer> {
  metered: Metered;
  target: Target;
  answer: Answer;
  usage: MeterUsage;
  charged: Nano;
}

/**
 * The model of a one-model operation, known, allowed, of the operation's type and not retired
 * (spec 9: a retired model answers through its replacement), with the providers routing leaves.
 */
export function routeOperation(
  deps: Routing,
  caller: Caller,
  modelType: ModelType,
  context: CallContext,
): { models: RoutedModel[]; headers: Record<string, string> } {
  const resolved = resolveModel(deps.catalog, context.model, deps.clock.now(), { allowedModels: caller.allowed_models, type: modelType });
  const preferences = parseProviderPreferences(context.provider);
  const routes = routeTargetsWithin(
    resolved.model,
    { preferences, suffixes: [], parameters: requestParameters(context.body ?? {}) },
    deps.providerStats,
    routingAccessOf(caller.guardrails),
  );
  return { models: [{ model: resolved.model, routes, fields: {} }], headers: resolved.headers };
}

/** What routing a call reads: the catalog, the time (retirements), this process's provider figures. */
export interface Routing {
  catalog: Catalog;
  clock: Clock;
  providerStats: ProviderStats;
}

/** Reserve, attempt and settle one call of `operation`: the whole pipeline for an answer that comes at once. */
export async function runOperation<Request, Answer>(
  calls: MeteredCalls,
  routing: Routing,
  caller: Caller,
  operation: Operation<Request, Answer>,
  request: Request,
  context: CallContext,
): Promise<RunResult<Answer>> {
  const { metered, target, answer, settlement } = await answerOperation(calls, routing, caller, operation, request, context);
  const charged = await calls.settle(metered, target, settlement);
  return { metered, target, answer, usage: settlement.usage, charged };
}

/**
 * Reserve and attempt one call of `operation`, leaving the settlement to the caller: a job keeps
 * the answer and its settlement before it settles (ARCHITECTURE section 10), so a crash between
 * the two loses neither.
 */
export async function answerOperation<Request, Answer>(
  calls: MeteredCalls,
  routing: Routing,
  caller: Caller,
  operation: Operation<Request, Answer>,
  sent: Request,
  context: CallContext,
  options: ReserveOptions = {},
): Promise<Answered<Answer>> {
  const { models, headers } = routeOperation(routing, caller, operation.modelType, context);
  const guarded = guardPrompt(caller, operation, sent);
  const request = guarded.request;
  if (guarded.findings.length > 0) options = { ...options, guardrailFindings: guarded.findings };
  const plan: Plan = {
    models,
    headers,
    promptTokens: operation.promptTokens(request),
    worstCase: operation.worstCase(request),
    endpoint: operation.endpoint,
    user: context.user,
    clientRequestId: context.clientRequestId,
    idempotency: context.idempotency,
    admission: context.admission,
  };
  const metered = await calls.reserve(caller, plan, options);
  const started = performance.now();
  let answeredIn = 0;
  const { target, value: answer } = await calls.attempt(metered, async (t) => {
    const tried = performance.now();
    const value = await operation.call(t, request);
    answeredIn = performance.now() - tried;
    return value;
  });
  // The provider's figure is its own answer's time; the generation's is the caller's wait, fallbacks included.
  routing.providerStats.record(target.model.id, target.route.provider.name, { latencyMs: answeredIn, ttftMs: null, completionTokens: 0 });
  const latencyMs = performance.now() - started;
  let usage: MeterUsage;
  let returned: number;
  try {
    usage = operation.usageOf(answer, request, target);
    returned = operation.returned(answer);
  } catch (err) {
    // An answer the operation cannot read is a provider failure (502, not billed): released, never left open.
    const failure = new ProviderError({
      kind: 'invalid_response',
      status: 502,
      message: `the provider's answer could not be read: ${(err as Error).message}`,
      cause: err,
    });
    await calls.release(metered.reservation, target, failure, latencyMs, 'invalid_upstream_answer');
    throw markFailedGeneration(failure, metered.reservation.id);
  }
  return { metered, target, answer, settlement: { usage, latencyMs, ttftMs: null, returned } };
}
