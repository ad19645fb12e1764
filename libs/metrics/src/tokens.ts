/** This process's Prometheus metrics (ServiceMetrics), for Nest injection. */
export const SERVICE_METRICS = Symbol('SERVICE_METRICS');
