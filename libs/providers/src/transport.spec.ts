import { setTimeout as sleep } from 'node:timers/promises';
import { Deadline, STREAM_END_GRACE_MS } from './transport';

describe('Deadline', () => {
  async function* pieces(n: number): AsyncGenerator<Uint8Array> {
    for (let i = 0; i < n; i++) yield new Uint8Array([i]);
  }

  it('fires when the upstream stays silent longer than its time', async () => {
    const deadline = new Deadline(30, undefined);
    await sleep(80);
    expect(deadline.signal.aborted).toBe(true);
  });

  it('is re-armed by every piece read, and never fires once disposed', async () => {
    const deadline = new Deadline(40, undefined);
    for await (const _ of deadline.whileReading(pieces(3))) await sleep(25);
    deadline.dispose();
    await sleep(100);
    expect(deadline.signal.aborted).toBe(false);
  });

  it("leaves no timer behind when a stream's last event shortens it from inside a read", async () => {
    // The last event is seen while its piece is being read: the stream end re-arms the shorter
    // grace, then the read re-arms on its way out. A second timer left running would abort a
    // request that has long finished.
    const deadline = new Deadline(60_000, undefined);
    const end = deadline.streamEnd(() => true);
    for await (const _ of deadline.whileReading(pieces(1))) end.onLast?.();
    deadline.dispose();
    await sleep(STREAM_END_GRACE_MS + 200);
    expect(deadline.signal.aborted).toBe(false);
  });

  it("follows the caller's signal until disposed, and answers a caller's cancellation as the caller's own reason", () => {
    const caller = new AbortController();
    const deadline = new Deadline(60_000, caller.signal);
    const reason = new Error('client went away');
    caller.abort(reason);
    expect(deadline.signal.aborted).toBe(true);
    expect(deadline.failure(new Error('socket closed'))).toBe(reason);
    deadline.dispose();

    const later = new AbortController();
    const done = new Deadline(60_000, later.signal);
    done.dispose();
    later.abort(new Error('too late'));
    // A call that is over is not aborted by what its caller does after.
    expect(done.signal.aborted).toBe(false);
  });

  it('says a call that hit its time timed out, and one refused by the network that it failed', async () => {
    const deadline = new Deadline(20, undefined);
    await sleep(60);
    expect(deadline.failure(new Error('aborted'))).toMatchObject({ kind: 'timeout', status: 504 });
    const network = new Deadline(60_000, undefined);
    expect(network.failure(new Error('connect ECONNREFUSED 127.0.0.1:1'))).toMatchObject({ kind: 'network', status: 502 });
    network.dispose();
  });
});
