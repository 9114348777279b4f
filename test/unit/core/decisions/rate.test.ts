import { describe, expect, it } from 'vitest';
import { decideRate, type RateLog } from '../../../../shared/core/decisions/rate.ts';

/** Feeds takes at the given times through the decision, as one store would; returns the granted times. */
function run(times: readonly number[], limit: number, perSeconds: number): number[] {
  let log: RateLog | undefined;
  const granted: number[] = [];
  for (const now of times) {
    const d = decideRate(log, limit, perSeconds, now);
    if (d.grant) {
      log = d.next;
      granted.push(now);
    }
  }
  return granted;
}

/** The most grants in any half-open window [t, t + windowMs). */
function busiestWindow(granted: readonly number[], windowMs: number): number {
  let most = 0;
  for (const start of granted)
    most = Math.max(most, granted.filter((t) => t >= start && t < start + windowMs).length);
  return most;
}

describe('Function: decideRate', () => {
  it('grants a burst of `limit` at once, then waits until the oldest grant leaves the window', () => {
    // Prepare
    let log: RateLog | undefined;
    for (let i = 0; i < 3; i++) {
      const d = decideRate(log, 3, 2, 1000);
      if (!d.grant) throw new Error('expected a grant');
      log = d.next;
    }

    // Act
    const refused = decideRate(log, 3, 2, 1500);

    // Assess
    expect(log).toEqual({ version: 3, grants: [1000, 1000, 1000] });
    expect(refused).toEqual({ grant: false, waitMs: 1500 });
    expect(decideRate(log, 3, 2, 3000)).toEqual({ grant: true, next: { version: 4, grants: [3000] } });
  });

  it('never lets any window of perSeconds hold more than `limit` grants, whatever the arrival times', () => {
    // Prepare: steady, bursty and random arrivals (a seeded generator).
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const random1 = Array.from({ length: 2000 }, () => Math.floor(random() * 20_000)).sort((a, b) => a - b);
    const bursts = Array.from({ length: 600 }, (_, i) => Math.floor(i / 30) * 700);
    const steady = Array.from({ length: 400 }, (_, i) => i * 50);

    for (const times of [random1, bursts, steady]) {
      // Act
      const granted = run(times, 5, 1);

      // Assess
      expect(busiestWindow(granted, 1000)).toBe(5);
    }
    // Takes arriving all the time get close to the full rate (5 per second over 20 s and 19.95 s).
    expect(run(random1, 5, 1).length).toBeGreaterThanOrEqual(95);
    expect(run(steady, 5, 1).length).toBe(100);
  });

  it('is not GCRA: after a burst, nothing more until the window has passed', () => {
    // GCRA with T = 200 ms and tolerance 800 ms would grant again at 200, 400, 600, 800: 9 in one second.
    expect(run([0, 0, 0, 0, 0, 200, 400, 600, 800, 999], 5, 1)).toEqual([0, 0, 0, 0, 0]);
  });

  it('keeps counting old grants after the limit was lowered, and waits for enough of them to leave', () => {
    // Prepare: 4 grants under a limit of 4, then the limit becomes 2.
    const log: RateLog = { version: 4, grants: [0, 100, 200, 300] };

    // Act and assess: three must leave (0, 100 and 200) for a grant to leave 2 in the window.
    expect(decideRate(log, 2, 1, 500)).toEqual({ grant: false, waitMs: 700 });
    expect(decideRate(log, 2, 1, 1199)).toEqual({ grant: false, waitMs: 1 });
    expect(decideRate(log, 2, 1, 1200)).toMatchObject({ grant: true, next: { grants: [300, 1200] } });
  });

  it('counts a grant stamped ahead of now (a faster clock) as recent', () => {
    expect(decideRate({ version: 1, grants: [1300] }, 1, 1, 1000)).toEqual({ grant: false, waitMs: 1300 });
  });

  it('decides a take stamped before the newest grant at that grant, so grants a later write pruned still count', () => {
    // Found by the interleaving model: a take stamped 5000 (a slow request) reached the log after one
    // stamped 6200 had pruned 1000 and 1100; decided at 5000 it was granted, 3 grants in 5 s (1000, 1100, 5000).
    const limit = 2;
    const pruned = decideRate({ version: 2, grants: [1000, 1100] }, limit, 5, 6200);
    if (!pruned.grant) throw new Error('expected a grant at 6200');

    const stale = decideRate(pruned.next, limit, 5, 5000);

    expect(stale).toMatchObject({ grant: true, next: { grants: [6200, 6200] } });
    const stamps = [1000, 1100, ...(stale.grant ? stale.next.grants : [])];
    for (const from of stamps) {
      expect(stamps.filter((t) => t >= from && t < from + 5000).length).toBeLessThanOrEqual(limit);
    }
  });
});
