import { describe, expect, it } from 'vitest';
import { decideRate, MAX_AHEAD_MS, type RateLog } from '../../../../shared/core/decisions/rate.ts';

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

    // Its answer came back at 6300 (`latest`): the grant at 6200 is no fast clock's, it counts.
    const stale = decideRate(pruned.next, limit, 5, 5000, 6300);

    expect(stale).toMatchObject({ grant: true, next: { grants: [6200, 6200] } });
    const stamps = [1000, 1100, ...(stale.grant ? stale.next.grants : [])];
    for (const from of stamps) {
      expect(stamps.filter((t) => t >= from && t < from + 5000).length).toBeLessThanOrEqual(limit);
    }
  });

  describe('a skewed clock (issue 31 item 8)', () => {
    const SKEW = 600_000;

    it('does not stall a 2-per-second key for a worker whose peer runs 10 minutes fast', () => {
      // Prepare: the fast worker took the window's two permits, stamped 10 minutes ahead.
      let log: RateLog | undefined;
      for (let i = 0; i < 2; i++) {
        const d = decideRate(log, 2, 1, 1_000_000 + SKEW);
        if (!d.grant) throw new Error('expected a grant');
        log = d.next;
      }

      // Act: a worker with the right clock takes a permit.
      const other = decideRate(log, 2, 1, 1_000_000);

      // Assess: granted at its own time, the fast worker's grants kept for it.
      expect(other).toEqual({
        grant: true,
        next: { version: 3, grants: [1_000_000, 1_000_000 + SKEW, 1_000_000 + SKEW] },
      });
    });

    it('keeps both workers taking permits when one runs 10 minutes fast, each waiting as told', () => {
      // Prepare: two workers asking for a 2-per-second key for 10 s, one with its clock 10 minutes ahead;
      // a refused worker asks again after the wait it was told, a granted one 100 ms later.
      let log: RateLog | undefined;
      const granted = { fast: [] as number[], right: [] as number[] };
      const nextAt = { fast: 0, right: 0 };

      // Act
      for (let t = 0; t < 10_000; t += 10) {
        for (const [who, offset] of [
          ['fast', SKEW],
          ['right', 0],
        ] as const) {
          if (t < nextAt[who]) continue;
          const d = decideRate(log, 2, 1, t + offset);
          if (d.grant) {
            log = d.next;
            granted[who].push(t);
            nextAt[who] = t + 100;
          } else {
            nextAt[who] = t + d.waitMs;
          }
        }
      }

      // Assess: the right clock is not stalled for the skew (it was told to wait 601 s after one grant),
      // and what the skew costs is bounded: the fast worker keeps to the limit on its own grants, the
      // other takes at most one more a window (the fast worker's writes drop grants it takes for old).
      expect(granted.right.length).toBeGreaterThanOrEqual(19);
      expect(granted.fast.length).toBeGreaterThanOrEqual(19);
      expect(busiestWindow(granted.fast, 1000)).toBe(2);
      expect(busiestWindow(granted.right, 1000)).toBeLessThanOrEqual(3);
      expect(log?.grants.length).toBeLessThanOrEqual(4);
    });

    it('keeps the limit for a window of perSeconds - d when two clocks are 1.5 s apart (docs/jobs.md, "Clocks")', () => {
      // Prepare: two workers on a 1-per-10-s key, one clock 1.5 s ahead of the other, each asking again
      // after the wait it was told (a granted one 100 ms later), for a minute.
      const d = 1500;
      let log: RateLog | undefined;
      const granted: number[] = [];
      const nextAt = { fast: 0, right: 50 };

      // Act
      for (let t = 0; t < 60_000; t += 10) {
        for (const [who, offset] of [
          ['fast', d],
          ['right', 0],
        ] as const) {
          if (t < nextAt[who]) continue;
          const decision = decideRate(log, 1, 10, t + offset);
          if (decision.grant) {
            log = decision.next;
            granted.push(t);
            nextAt[who] = t + 100;
          } else {
            nextAt[who] = t + decision.waitMs;
          }
        }
      }

      // Assess: in real time, never two starts within 10 s - 1.5 s; the skew costs waits, not the limit.
      const tooClose = granted.filter((t, i) => i > 0 && t - (granted[i - 1] ?? 0) < 10_000 - d);
      expect(tooClose).toEqual([]);
      expect(busiestWindow(granted, 10_000 - d)).toBe(1);
      expect(granted.length).toBeGreaterThanOrEqual(5);
    });

    it('stamps a grant at most MAX_AHEAD_MS before the latest clock, so a take slowed by a stall keeps its window', () => {
      // Prepare: a take on a 1-per-2-s key begun at 0 (its `now`) whose decision came at 2100: the event
      // loop stalled, or its requests were slow. The job starts after the write, at 2100 or later.
      const stalled = decideRate(undefined, 1, 2, 0, 2100);
      if (!stalled.grant) throw new Error('expected a grant');

      // Act: another worker asks at 2200, 100 ms after that start.
      const next = decideRate(stalled.next, 1, 2, 2200);

      // Assess: refused; the stalled start is stamped 1 s early at most (as a clock 1 s off would be).
      expect(next).toEqual({ grant: false, waitMs: 900 });
      expect(stalled.next.grants).toEqual([2100 - MAX_AHEAD_MS]);
    });

    it('counts a grant up to MAX_AHEAD_MS ahead of the latest clock, and a slow request by its latest time', () => {
      const log: RateLog = { version: 1, grants: [1000 + MAX_AHEAD_MS] };
      // At the edge: counted (a clock a little fast, or a request's own time).
      expect(decideRate(log, 1, 1, 1000)).toEqual({ grant: false, waitMs: MAX_AHEAD_MS + 1000 });
      // A take begun at 0 whose answer came back at 1900: the grant at 2000 is no fast clock's.
      expect(decideRate(log, 1, 1, 0, 1900)).toEqual({ grant: false, waitMs: 3000 });
      // Past the edge: left out.
      expect(decideRate(log, 1, 1, 999)).toMatchObject({ grant: true });
    });
  });
});
