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
export { type Tried } from './attempts';
export { type MeteringDeps, type MeteringObserver, type TokenLimits, type UnsettledCharge, type UnsettledCharges } from './metering-deps';
export { MeteredCalls } from './pipeline';
export {
  type AnsweredBy,
  type DecidedCharge,
  type HeldReservation,
  newGenerationId,
  type Metered,
  type Plan,
  type PromptAdmission,
  type RequestTags,
  type Reservation,
  type ReserveOptions,
  type Settlement,
  type TargetRef,
} from './reservation';
export { isHoldNotOpen, settleDurably } from './settle-durably';
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
