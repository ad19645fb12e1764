/**
 * The billed-call pipeline (ARCHITECTURE section 10): operations, meters, and
 * reserve -> attempt -> settle, shared by every model call whatever its interface.
 */
export { byokKeyRejected, byokUnavailable } from './byok';
export { decimalOf, derivedCostLines, explainCharge, meterLines, providerCostOf, sumOfLines, type CostLine, type ExplainedCharge } from './cost-lines';
export { failedGenerationOf, markFailedGeneration } from './failed-generation';
export { costOfMeters, DEFAULT_MAX_OUTPUT_TOKENS, METERS, recordedMeters, tokenMeters, tokenWorstCase, type Meter, type MeterUsage } from './meters';
export { answerOperation, routeOperation, runOperation, type Answered, type CallContext, type Operation, type Routing, type RunResult } from './operation';
export { deliveredUsage, MeteredStream, tokenSettlement, type StreamBill, type StreamProgress, type StreamProgressStore } from './metered-stream';
export {
  MeteredCalls,
  isHoldNotOpen,
  type AnsweredBy,
  type DecidedCharge,
  type HeldReservation,
  newGenerationId,
  settleDurably,
  type Metered,
  type MeteringDeps,
  type MeteringObserver,
  type Plan,
  type RequestTags,
  type Reservation,
  type ReserveOptions,
  type Settlement,
  type TargetRef,
  type TokenLimits,
  type Tried,
  type UnsettledCharge,
  type UnsettledCharges,
} from './pipeline';
export {
  openStream,
  STREAM_STALL_MS,
  StreamRelay,
  StreamStalled,
  type Delivered,
  type OpenedStream,
  type RelayOptions,
  type StreamEncoder,
  type StreamOutcome,
  type StreamSink,
} from './stream';
export {
  allFailed,
  costOf,
  operationOf,
  OwnProviders,
  pricesOf,
  targetsOf,
  worthAnotherTry,
  type Failure,
  type PricedTarget,
  type RoutedModel,
  type Target,
  type ToolPrices,
} from './targets';
export { rateLimitBucket, rateLimitHeaders, TokenWindows, tokensExceeded, tokenWindowHeaders, tooManyRequests } from './token-windows';
export { Metering } from './metering.service';
export { MeteringModule } from './metering.module';
