import { setTimeout as sleep } from 'node:timers/promises';
import type { ChatChunk, ChatUsage } from '@svc/providers';
import { openStream, type RelayOptions, StreamRelay, StreamStalled, type StreamEncoder, type StreamOutcome, type StreamSink } from './stream';

/** A client's body in memory: what it was sent, and whether it takes more. */
class MemorySink implements StreamSink {
  readonly frames: string[] = [];
  last: string | null = null;
  abandoned: Error | null = null;
  /** A client that stopped reading: every write fills the body, and it never drains. */
  stopped = false;

  write(frames: string): boolean {
    this.frames.push(frames);
    return !this.stopped;
  }

  async drained(ms: number): Promise<boolean> {
    if (!this.stopped) return true;
    await sleep(ms);
    return false;
  }

  finish(frames: string): void {
    this.last = frames;
  }

  abandonAfter(_ms: number, reason: Error): void {
    this.abandoned = reason;
  }
}

/** The frames an encoder writes, as readable lines. */
const encoder: StreamEncoder = {
  chunk: (c) => [`chunk ${c.id} ${c.model} ${c.choices.map((x) => x.delta.content ?? '').join('')}\n`],
  finish: (usage, reason) => [`finish ${usage.cost} ${reason}\n`],
  error: (body) => [`error ${JSON.stringify(body)}\n`],
};

const chunk = (delta: ChatChunk['choices'][number]['delta'], finish: string | null = null): ChatChunk => ({
  id: 'upstream-id',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'upstream-model',
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const usage: ChatUsage = { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 };
const usageChunk: ChatChunk = { ...chunk({}), choices: [], usage };

/** An upstream that yields `chunks` (each after `gapMs`), then fails with `failure` if given. */
function upstream(chunks: ChatChunk[], options: { gapMs?: number; failure?: Error } = {}): AsyncIterator<ChatChunk> & { returned: boolean } {
  const it = (async function* () {
    for (const c of chunks) {
      if (options.gapMs) await sleep(options.gapMs);
      yield c;
    }
    if (options.failure) throw options.failure;
  })();
  const tracked = Object.assign(it, { returned: false });
  const ret = it.return.bind(it);
  tracked.return = (value?: unknown) => {
    tracked.returned = true;
    return ret(value as undefined);
  };
  return tracked;
}

function relayOf(sink: MemorySink, over: Partial<RelayOptions> = {}) {
  const settled: StreamOutcome[] = [];
  const relay = new StreamRelay(sink, {
    id: 'gen-1',
    model: 'sim/echo',
    encoder,
    settle: async (outcome) => {
      settled.push(outcome);
      return { ...(outcome.usage ?? usage), cost: 0.25 };
    },
    errorEvent: (failure) => ({ error: { message: (failure as Error).message } }),
    ...over,
  });
  return { relay, settled };
}

describe('openStream', () => {
  it('reads past the role chunk to the first output, so a failure before it can still fall back', async () => {
    const opened = await openStream(upstream([chunk({ role: 'assistant' }), chunk({ content: 'Hi' }), chunk({ content: ' there' })]));
    expect(opened.head.map((c) => c.choices[0].delta)).toEqual([{ role: 'assistant' }, { content: 'Hi' }]);
    expect((await opened.rest.next()).value?.choices[0].delta.content).toBe(' there');
  });

  it('fails, with nothing sent, when the upstream dies before its first output', async () => {
    await expect(openStream(upstream([chunk({ role: 'assistant' })], { failure: new Error('reset') }))).rejects.toThrow('reset');
  });
});

describe('StreamRelay', () => {
  it("relays the chunks under the generation's id and model, keeps the upstream's usage chunk back, and ends with the settled cost", async () => {
    const sink = new MemorySink();
    const { relay, settled } = relayOf(sink);
    await relay.run(await openStream(upstream([chunk({ role: 'assistant' }), chunk({ content: 'Hi' }), chunk({ content: '!' }, 'stop'), usageChunk])));
    expect(sink.frames).toEqual(['chunk gen-1 sim/echo \n', 'chunk gen-1 sim/echo Hi\n', 'chunk gen-1 sim/echo !\n']);
    expect(sink.last).toBe('finish 0.25 stop\n');
    expect(settled).toHaveLength(1);
    expect(settled[0]).toMatchObject({ usage, failure: null, delivered: { content: 'Hi!', reasoning: '', toolNames: '', toolArguments: '' } });
    expect(settled[0].ttftMs).not.toBeNull();
    await expect(relay.finished).resolves.toBe(true);
  });

  it('counts reasoning and tool calls as delivered, for a stream that reports no usage', async () => {
    const sink = new MemorySink();
    const { relay, settled } = relayOf(sink);
    const call = { index: 0, id: 'c1', type: 'function' as const, function: { name: 'weather', arguments: '{"city":' } };
    await relay.run(
      await openStream(
        upstream([chunk({ reasoning: 'Hmm.' }), chunk({ tool_calls: [call] }), chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] })]),
      ),
    );
    expect(settled[0]).toMatchObject({ usage: null, delivered: { content: '', reasoning: 'Hmm.', toolNames: 'weather', toolArguments: '{"city":"Paris"}' } });
  });

  it('settles a stream that broke off for what it delivered, and ends it with an error event, never a clean finish', async () => {
    const sink = new MemorySink();
    const { relay, settled } = relayOf(sink);
    await relay.run(await openStream(upstream([chunk({ content: 'Half an' })], { failure: new Error('upstream reset') })));
    expect(settled[0]).toMatchObject({ usage: null, delivered: { content: 'Half an' } });
    expect((settled[0].failure as Error).message).toBe('upstream reset');
    expect(sink.last).toBe('error {"error":{"message":"upstream reset"}}\n');
    await expect(relay.finished).resolves.toBe(false);
  });

  it('ends with an error event when the settlement fails: the cost of what went out is unknown', async () => {
    const sink = new MemorySink();
    const { relay } = relayOf(sink, {
      settle: async () => {
        throw new Error('ledger unreachable');
      },
    });
    await relay.run(await openStream(upstream([chunk({ content: 'Hi' }, 'stop'), usageChunk])));
    expect(sink.last).toBe('error {"error":{"message":"ledger unreachable"}}\n');
    await expect(relay.finished).resolves.toBe(false);
  });

  it('cuts the stream of a client that takes nothing for stallMs, lets its upstream go, and bills what was delivered', async () => {
    const sink = new MemorySink();
    sink.stopped = true;
    const { relay, settled } = relayOf(sink, { stallMs: 30 });
    const source = upstream([chunk({ content: 'one' }), chunk({ content: 'two' }), chunk({ content: 'three' })]);
    await relay.run(await openStream(source));
    expect(settled[0].failure).toBeInstanceOf(StreamStalled);
    expect(settled[0].delivered.content).toBe('one');
    expect(source.returned).toBe(true);
    expect(sink.abandoned).toBeInstanceOf(StreamStalled);
    expect(sink.last).toContain('read nothing of the stream for 0.03 s');
  });

  it('records progress while the stream runs, and settles only after the last record is written', async () => {
    const sink = new MemorySink();
    const events: string[] = [];
    const { relay } = relayOf(sink, {
      progressIntervalMs: 10,
      progress: async (sofar) => {
        events.push(`progress ${sofar.delivered.content}`);
        await sleep(15);
        events.push('progress written');
      },
      settle: async (outcome) => {
        events.push(`settle ${outcome.delivered.content}`);
        return { ...usage, cost: 0 };
      },
    });
    await relay.run(await openStream(upstream([chunk({ content: 'a' }), chunk({ content: 'b' }), chunk({ content: 'c' }, 'stop'), usageChunk], { gapMs: 25 })));
    const progress = events.filter((e) => e.startsWith('progress ') && e !== 'progress written').map((e) => e.slice('progress '.length));
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.every((p) => ['a', 'ab', 'abc'].includes(p))).toBe(true);
    expect(events[events.length - 1]).toBe('settle abc');
    // One write at a time: a tick while one is on its way is skipped, not queued.
    events.slice(0, -1).forEach((e, i) => expect(e).toEqual(i % 2 === 0 ? expect.stringMatching(/^progress [abc]+$/) : 'progress written'));
  });
});
