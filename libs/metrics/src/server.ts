import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServiceMetrics } from './metrics';

export interface MetricsServer {
  /** The port it listens on (the configured one, or the one the system chose for 0). */
  readonly port: number;
  close(): Promise<void>;
}

/**
 * SVC_METRICS_PORT: `GET /metrics` alone, without a token, on a port of its own (one the
 * operator keeps inside the network); everything else is 404.
 */
export async function startMetricsServer(metrics: ServiceMetrics, port: number, host: string): Promise<MetricsServer> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found: GET /metrics\n');
      return;
    }
    metrics.exposition().then(
      ({ contentType, body }) => response.writeHead(200, { 'content-type': contentType }).end(request.method === 'HEAD' ? undefined : body),
      (err: unknown) => response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`metrics unavailable: ${(err as Error).message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
