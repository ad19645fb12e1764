import { PassThrough } from 'node:stream';
import { nestLogger, processLog, routeConsoleThrough } from './logging';

function capture(tty: boolean) {
  const out = Object.assign(new PassThrough(), { isTTY: tty });
  const chunks: string[] = [];
  out.on('data', (chunk: Buffer) => chunks.push(chunk.toString('utf8')));
  return { out, lines: () => chunks.join('').split('\n').filter(Boolean) };
}

describe('the process log (issue 22)', () => {
  it('is JSON unless told otherwise or written to a terminal', () => {
    const pipe = capture(false);
    processLog({ logLevel: 'info', logFormat: null }, pipe.out).info({ a: 1 }, 'hello');
    expect(JSON.parse(pipe.lines()[0])).toMatchObject({ level: 30, msg: 'hello', a: 1 });

    const terminal = capture(true);
    processLog({ logLevel: 'info', logFormat: null }, terminal.out).info({ a: 1 }, 'hello');
    expect(terminal.lines()[0]).toContain('hello');
    expect(() => JSON.parse(terminal.lines()[0])).toThrow();

    const forced = capture(true);
    processLog({ logLevel: 'info', logFormat: 'json' }, forced.out).info({}, 'plain');
    expect(JSON.parse(forced.lines()[0]).msg).toBe('plain');
  });

  it("writes Nest's messages at matching levels, its start-up chatter at debug and a stack as a field", () => {
    const pipe = capture(false);
    const nest = nestLogger(processLog({ logLevel: 'info', logFormat: 'json' }, pipe.out));
    nest.log('Mapped {/v1/models, GET} route', 'RouterExplorer');
    nest.warn('careful', 'http');
    nest.error('failed', 'Error: failed\n    at here', 'http');
    expect(pipe.lines().map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({ level: 40, msg: 'careful', context: 'http' }),
      expect.objectContaining({ level: 50, msg: 'failed', context: 'http', stack: 'Error: failed\n    at here' }),
    ]);
  });

  it('sends console.warn and console.error through the logger', () => {
    const pipe = capture(false);
    const { warn, error } = console;
    try {
      routeConsoleThrough(processLog({ logLevel: 'info', logFormat: 'json' }, pipe.out));
      console.warn('lease %s not renewed', 'g1');
      console.error('failed:', new Error('boom'));
    } finally {
      Object.assign(console, { warn, error });
    }
    const [first, second] = pipe.lines().map((l) => JSON.parse(l));
    expect(first).toMatchObject({ level: 40, msg: 'lease g1 not renewed' });
    expect(second).toMatchObject({ level: 50 });
    expect(second.msg).toMatch(/^failed: Error: boom\n/);
  });
});
