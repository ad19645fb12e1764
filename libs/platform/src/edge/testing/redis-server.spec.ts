import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { freePort } from './redis-server';

describe('freePort (the port a test server is killed and brought back on)', () => {
  it('lies below the kernel ephemeral range, where no outgoing connection, nor a client redialling it, is given it as its local port', async () => {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeLessThan(low);
      expect(port).toBeGreaterThanOrEqual(1_024);
    }
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(ports[0], '127.0.0.1', resolve);
    });
    await new Promise((resolve) => server.close(resolve));
  });
});
