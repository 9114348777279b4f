import { describe, expect, it } from 'vitest';
import { Pacer, parseRate } from '../../../shared/producer/pacer.ts';

describe('Function: parseRate', () => {
  it('reads a count per unit as messages per second', () => {
    expect(parseRate('50')).toBe(50);
    expect(parseRate('50/s')).toBe(50);
    expect(parseRate(' 2.5 / sec ')).toBe(2.5);
    expect(parseRate('600/min')).toBe(10);
    expect(parseRate('120/m')).toBe(2);
    expect(parseRate('7200/h')).toBe(2);
  });
  it('refuses zero, negatives, unknown units and junk, naming the value', () => {
    for (const bad of ['0', '-5', '5/d', 'fast', '', '5/']) {
      expect(() => parseRate(bad), bad).toThrow(RangeError);
    }
    expect(() => parseRate('5/d')).toThrow('received "5/d"');
  });
});

describe('Class: Pacer', () => {
  const clock = () => {
    let now = 1000;
    const waits: number[] = [];
    return {
      now: () => now,
      sleep: async (ms: number) => {
        waits.push(ms);
        now += ms;
      },
      waits,
    };
  };

  it('lets the first batch go at once and spaces the rest by count / rate', async () => {
    // Prepare
    const c = clock();
    const pacer = new Pacer({ perSecond: 5, now: c.now, sleep: c.sleep });
    // Act
    await pacer.take(10);
    await pacer.take(10);
    await pacer.take(5);
    // Assess: 10 at 5/s books 2 s; the third call waits for the second booking to pass.
    expect(c.waits).toEqual([2000, 2000]);
  });

  it('does not wait without a rate, and sizes batches to the rate', async () => {
    const c = clock();
    const unlimited = new Pacer({ perSecond: undefined, now: c.now, sleep: c.sleep });
    await unlimited.take(1000);
    expect(c.waits).toEqual([]);
    expect(unlimited.batchSize(10)).toBe(10);
    expect(new Pacer({ perSecond: 3 }).batchSize(10)).toBe(3);
    expect(new Pacer({ perSecond: 0.5 }).batchSize(10)).toBe(1);
    expect(new Pacer({ perSecond: 500 }).batchSize(10)).toBe(10);
  });

  it('refuses a rate that is not positive', () => {
    expect(() => new Pacer({ perSecond: 0 })).toThrow('perSecond must be > 0, received 0');
  });
});
