import { startSideBySide } from './until';

describe('startSideBySide', () => {
  it('hands over every start that came, then throws the first failure', async () => {
    const kept: unknown[][] = [];
    const failure = new Error('the worker did not start');
    await expect(
      startSideBySide([Promise.resolve('gateway'), Promise.reject(failure), Promise.reject(new Error('later')), Promise.resolve(3)], (started) => {
        kept.push([...started]);
      }),
    ).rejects.toBe(failure);
    expect(kept).toEqual([['gateway', undefined, undefined, 3]]);
  });

  it('waits for the slowest start before it hands them over', async () => {
    let slowDone = false;
    const slow = new Promise<string>((resolve) => setTimeout(() => ((slowDone = true), resolve('slow')), 30));
    await startSideBySide([Promise.resolve(1), slow], ([one, late]) => {
      expect(slowDone).toBe(true);
      expect([one, late]).toEqual([1, 'slow']);
    });
  });
});
