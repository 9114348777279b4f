import { describe, expect, it } from 'vitest';
import { RowTurns } from '../../../../shared/core/pipeline/row-turns.ts';

describe('Class: RowTurns', () => {
  it('gives the turns on one row one at a time, in the order asked, and other rows at once', async () => {
    // Prepare
    const turns = new RowTurns();
    const signal = new AbortController().signal;
    const order: string[] = [];
    const first = await turns.take('stock#a', signal);

    // Act
    const second = turns.take('stock#a', signal).then((end) => {
      order.push('second');
      return end;
    });
    const third = turns.take('stock#a', signal).then((end) => {
      order.push('third');
      end();
    });
    const other = await turns.take('stock#b', signal);
    await Promise.resolve();
    order.push('first ends');
    first();
    (await second)();
    await third;
    other();

    // Assess
    expect(order).toEqual(['first ends', 'second', 'third']);
    expect(turns.size).toBe(0);
  });

  it('rejects a wait its signal aborts, and the turns behind it go on', async () => {
    const turns = new RowTurns();
    const first = await turns.take('k', new AbortController().signal);
    const stop = new AbortController();
    const aborted = turns.take('k', stop.signal);
    const behind = turns.take('k', new AbortController().signal);

    stop.abort(new Error('lease lost'));
    await expect(aborted).rejects.toThrow('lease lost');
    first();
    (await behind)();

    expect(turns.size).toBe(0);
  });
});
