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
});
