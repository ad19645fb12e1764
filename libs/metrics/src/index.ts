/** Issue 22: the process's Prometheus metrics (prom-client, a registry per process) and their pure helpers. */
export { routeLabel, ServiceMetrics, upstreamErrorCode, type MetricsSources } from './metrics';
export { startMetricsServer, type MetricsServer } from './server';
export { GenerationNotes, type RequestRecord } from './generation-notes';
export { SERVICE_METRICS } from './tokens';
