import { beforeAll, describe, expect, it } from 'vitest';
import { type Figures, JOB_KINDS, measure } from '../../../bench/scale/measure.ts';
import { loadAt, wallRates } from '../../../bench/scale/model.ts';
import { WORKLOADS, type Workload } from '../../../bench/scale/workloads.ts';

// A small pass: the figures are per job, so they do not depend on the count; the rate series is at the
// rate workload's own limit (1,000 a second), as its log's layout depends on the limit.
let figures: Figures;
beforeAll(async () => {
  figures = await measure({ jobs: 12, slotLimit: 20 });
}, 20_000);

const workload = (id: string): Workload => {
  const w = WORKLOADS.find((x) => x.id === id);
  if (!w) throw new Error(`no workload ${id}`);
  return w;
};

describe('bench:scale measured pass', () => {
  it("puts every request's units down to an item: the books add up to the client's own tally, per table", () => {
    const table: Record<string, string> = {
      job: 'jobs',
      rate: 'leases',
      slot: 'leases',
      named: 'leases',
      app: 'ledger',
    };
    for (const kind of JOB_KINDS) {
      const k = figures.kinds[kind];
      const books: Record<string, { wru: number; rru: number }> = {};
      for (const [role, f] of Object.entries(k.roles)) {
        const t = table[role];
        if (!t || !f) continue; // the problems index is billed on top of the table
        books[t] = { wru: (books[t]?.wru ?? 0) + f.wru, rru: (books[t]?.rru ?? 0) + f.rru };
      }
      for (const [t, tally] of Object.entries(k.tally)) {
        expect({ kind, t, wru: books[t]?.wru ?? 0, rru: books[t]?.rru ?? 0 }).toEqual({
          kind,
          t,
          wru: expect.closeTo(tally.wru, 9),
          rru: expect.closeTo(tally.rru, 9),
        });
      }
    }
  });

  it('measures what bench:core counts: claim + commit (2 requests, 5 WRU), fast path 1 and 4, a copy 1 and 1', () => {
    const total = (kind: 'leased' | 'fast' | 'duplicate') =>
      Object.values(figures.kinds[kind].tally).reduce((n, t) => n + t.wru, 0);
    expect([figures.kinds.leased.requests, total('leased')]).toEqual([2, 5]);
    expect([figures.kinds.fast.requests, total('fast')]).toEqual([1, 4]);
    expect([figures.kinds.duplicate.requests, total('duplicate')]).toEqual([1, 1]);
  });
});

describe('bench:scale model', () => {
  it("uses the measured per-job figures: a one-kind workload's units per job are that kind's tally", () => {
    for (const [id, kind] of [
      ['plain', 'leased'],
      ['fast', 'fast'],
    ] as const) {
      const load = loadAt(figures, workload(id), 10_000);
      const tally = figures.kinds[kind].tally;
      expect(load.tables.jobs.wru / 10_000).toBeCloseTo(tally.jobs?.wru ?? Number.NaN, 9);
      expect(load.tables.app.wru / 10_000).toBeCloseTo(tally.ledger?.wru ?? Number.NaN, 9);
      expect(load.tables.leases.wru).toBe(0);
    }
  });

  it("puts the rate item's wall where its measured units per take reach 1,000 WRU/s", () => {
    const w = workload('rate');
    const wall = wallRates(figures, w).find((x) => x.wall.name === 'busiest leases item WRU');
    const onKey = (wall?.rate ?? 0) * (w.rateLimit?.share ?? 0);
    if (figures.rate.busiestShare === 1) {
      // One log item: it grows with its grants, and beyond about a third of the limit cannot take it.
      expect(onKey).toBeGreaterThan(100);
      expect(onKey).toBeLessThan(600);
      expect(wallRates(figures, w)[0]?.wall.name).toBe('busiest leases item WRU');
    } else {
      // A log spread over items: none of them is the wall below the limit.
      expect(onKey).toBeGreaterThan(w.rateLimit?.perSecond ?? 0);
    }
  });

  it('finds the hot named lease held back to back before its item throttles', () => {
    const names = wallRates(figures, workload('lease')).map((x) => x.wall.name);
    expect(names.indexOf('named lease held back to back')).toBeLessThan(
      names.indexOf('busiest leases item WRU'),
    );
  });
});

describe('bench --in-memory: the latency scenarios on the in-memory stores', () => {
  it('is opt-in and runs a consumer with its round trips held for the drawn latency', async () => {
    const { parseBenchOptions } = await import('../../../bench/compare/options.ts');
    const { runInMemory } = await import('../../../bench/compare/in-memory.ts');
    const { scenarioById } = await import('../../../bench/compare/scenarios.ts');
    expect(parseBenchOptions([]).inMemory).toBe(false);
    expect(parseBenchOptions(['--in-memory', '--scenarios', 'aws']).inMemory).toBe(true);
    const aws = scenarioById('aws');
    if (!aws) throw new Error('no aws scenario');
    const run = await runInMemory(aws, 'leased', { messages: 20, slots: 2 });
    // Claim + commit: two drawn round trips per job, and a batch can never beat its floor by much.
    expect([run.messages, run.callsPerJob]).toEqual([20, 2]);
    expect(run.jobsPerSlot).toBeLessThan(run.floor * 1.5);
  });
});

describe('bench:scale --load: the pipeline in memory under the per-partition limit', () => {
  it("throttles the rate item of one key offered beyond the model's wall, and nothing else", async () => {
    const { loadRun } = await import('../../../bench/scale/load.ts');
    // A partition of 50 WRU/s: one key's rate item (or, its log sharded, each shard's item) throttles.
    const seconds = await loadRun({
      scenario: 'rate',
      rate: 400,
      seconds: 2,
      workers: 2,
      latencyMs: 0,
      partitionWriteUnits: 50,
    });
    const throttled = new Map<string, number>();
    for (const s of seconds)
      for (const [k, v] of Object.entries(s.throttled)) throttled.set(k, (throttled.get(k) ?? 0) + v);
    expect(throttled.size).toBeGreaterThan(0);
    for (const key of throttled.keys()) expect(key).toMatch(/^scale-leases rate:(#\d+:)?load\.rate:k:hot$/);
    expect(seconds.some((s) => s.busiest.item.startsWith('rate '))).toBe(true);
  }, 20_000);
});
