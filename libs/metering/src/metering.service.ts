import { Inject, Injectable, Logger } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { CATALOG, type Catalog, defaultModelOf, ProviderStats, type ModelType } from '@svc/catalog';
import type { Caller } from '@svc/identity';
import { GATEWAY_LEASE, type GatewayLease, LEDGER_FORWARDER, LedgerCommand, type LedgerForwarder, recordUnsettled } from '@svc/ledger';
import { SERVICE_METRICS, type ServiceMetrics } from '@svc/metrics';
import { CLOCK, type Clock, CONFIG, type Config, READ_DB, type SqlRunner } from '@svc/platform';
import { ReadYourWrites } from '@svc/projections';
import { PROVIDER_CLIENTS, type Provider, SIMULATOR_URL } from '@svc/providers';
import { TRACING, type Tracing } from '@svc/telemetry';
import { answerOperation, routeOperation, runOperation, type Answered, type CallContext, type Operation, type Routing, type RunResult } from './operation';
import type { MeteringDeps } from './metering-deps';
import { MeteredCalls } from './pipeline';
import type { ReserveOptions } from './reservation';
import { OwnProviders, type RoutedModel, type Target } from './targets';
import { TokenWindows, tokenWindowHeaders } from './token-windows';

/**
 * The billed-call pipeline of this process (a gateway's, or a worker's running jobs): MeteredCalls
 * on the command bus (each decision then waits for the caller's reads to see it), the keys' token
 * windows, and this process's routing figures.
 */
@Injectable()
export class Metering {
  /** Per process, like the rest of the routing state: a hint for `provider.sort` and `:nitro`. */
  readonly providerStats = new ProviderStats();
  readonly calls: MeteredCalls;
  /** What routing reads: the catalog, the time (retirements), this process's provider figures. */
  readonly routing: Routing;
  /** Decides a command on an account's stream; the caller's next reads then see it. */
  readonly ledger: MeteringDeps['ledger'];
  private readonly logger = new Logger('metering');

  constructor(
    @Inject(CONFIG) config: Pick<Config, 'encryptionKey' | 'simulatorUrl' | 'upstreamTimeoutMs' | 'byokFeePercent'>,
    @Inject(CATALOG) private readonly catalog: Catalog,
    @Inject(CLOCK) clock: Clock,
    @Inject(PROVIDER_CLIENTS) providers: ReadonlyMap<string, Provider>,
    @Inject(SIMULATOR_URL) simulatorUrl: string | null,
    @Inject(GATEWAY_LEASE) gatewayLease: GatewayLease | null,
    @Inject(LEDGER_FORWARDER) forwarder: LedgerForwarder | null,
    @Inject(READ_DB) sql: SqlRunner,
    @Inject(SERVICE_METRICS) metrics: Pick<ServiceMetrics, 'metering'>,
    @Inject(TRACING) tracing: Tracing | null,
    commands: CommandBus,
    reads: ReadYourWrites,
    tokenWindows: TokenWindows,
  ) {
    this.routing = { catalog, clock, providerStats: this.providerStats };
    this.ledger = async (accountId, command, metadata) => {
      const handled = await (forwarder?.forward(accountId, command, metadata) ?? commands.execute(new LedgerCommand(accountId, command, metadata)));
      reads.wrote(accountId, handled.appended?.position);
      return handled;
    };
    this.calls = new MeteredCalls({
      clock,
      catalog,
      providers,
      own: new OwnProviders({
        encryptionKey: config.encryptionKey,
        simulatorUrl: simulatorUrl ?? config.simulatorUrl,
        timeoutMs: config.upstreamTimeoutMs,
      }),
      byokFeePercent: config.byokFeePercent,
      upstreamTimeoutMs: config.upstreamTimeoutMs,
      ledger: this.ledger,
      tokenLimits: {
        consumePrompt: async (caller: Caller, tokens: number) => tokenWindowHeaders(await tokenWindows.consumePromptTokens(caller, tokens)),
        recordOutput: (caller: Caller, tokens: number) => tokenWindows.recordCompletionTokens(caller, tokens),
      },
      leaseId: () => gatewayLease?.id,
      unsettled: { record: (charge) => recordUnsettled(sql, charge) },
      warn: (message) => this.logger.warn(message),
      observer: metrics.metering,
      tracing,
    });
  }

  /** One call of `operation` through the whole pipeline. */
  run<Request, Answer>(caller: Caller, operation: Operation<Request, Answer>, request: Request, context: CallContext): Promise<RunResult<Answer>> {
    return runOperation(this.calls, this.routing, caller, operation, request, context);
  }

  /** One call of `operation` held and answered, its settlement left to the caller (a batch line's). */
  answer<Request, Answer>(
    caller: Caller,
    operation: Operation<Request, Answer>,
    request: Request,
    context: CallContext,
    options?: ReserveOptions,
  ): Promise<Answered<Answer>> {
    return answerOperation(this.calls, this.routing, caller, operation, request, context, options);
  }

  /** The model of a one-model call and the providers routing leaves for it. */
  route(caller: Caller, type: ModelType, context: CallContext): { models: RoutedModel[]; headers: Record<string, string> } {
    return routeOperation(this.routing, caller, type, context);
  }

  /**
   * A free call (spec 4.13): no hold and no charge, but a generation record of cost 0. Without
   * `model`, the catalog's first model of `type` the key may use answers.
   */
  async runFree<T>(
    caller: Caller,
    type: ModelType,
    context: { model?: string | null; endpoint: string; clientRequestId?: string },
    call: (target: Target) => Promise<T>,
  ): Promise<{ id: string; target: Target; value: T; headers: Record<string, string> }> {
    const model = context.model ?? this.defaultModel(caller, type);
    const { models, headers } = this.route(caller, type, { model });
    const ran = await this.calls.runFree(caller, { models, endpoint: context.endpoint, clientRequestId: context.clientRequestId }, call);
    return { ...ran, headers };
  }

  /**
   * The model a call of `type` that names none gets: the catalog's first of that type the key
   * may use (moderation; search without an engine, spec 4.14).
   */
  defaultModel(caller: Caller, type: ModelType): string {
    return defaultModelOf(this.catalog, type, caller.allowed_models);
  }
}
