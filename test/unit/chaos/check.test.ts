import { describe, expect, it } from 'vitest';
import { maxOverlap, tenantFigures } from '../../../chaos/check.ts';
import { tallyKey } from '../../../chaos/jobs.ts';
import { planChaosWorkload } from '../../../chaos/workload.ts';

describe('chaos checker: most committed runs at once', () => {
  it('counts runs whose [start, commit) intervals overlap; a commit at a start does not overlap it', () => {
    const runs = [
      { key: 'a', start: 0, end: 10 },
      { key: 'b', start: 5, end: 15 },
      { key: 'c', start: 10, end: 20 },
      { key: 'd', start: 12, end: 13 },
    ];
    const { max, at } = maxOverlap(runs);
    expect(max).toBe(3);
    expect(at.sort()).toEqual(['b', 'c', 'd']);
    expect(maxOverlap(runs.slice(0, 3)).max).toBe(2);
    expect(maxOverlap([]).max).toBe(0);
  });

  it('per tenant, from the final tallies (start) and the rows (commit); uncommitted jobs do not count', () => {
    const workload = planChaosWorkload('run-x', { jobs: 100, seed: 's', leaseMs: 3000 });
    const keys = [...workload.tenants.jobs.keys()].filter(
      (k) => workload.tenants.jobs.get(k)?.tenant === workload.tenants.burstTenant,
    );
    const [k1, k2, k3, k4] = keys as [string, string, string, string];
    const rows = new Map([
      [k1, { dedupKey: k1, status: 'COMPLETED', completedAt: 100 }],
      [k2, { dedupKey: k2, status: 'COMPLETED', completedAt: 150 }],
      [k3, { dedupKey: k3, status: 'COMPLETED', completedAt: 120 }],
      // Not committed: its start (were it recorded) must not count.
      [k4, { dedupKey: k4, status: 'CANCELLED' }],
    ]);
    const ledger = [
      { account: tallyKey(k1, 'final'), applied: 1, startedAt: 0 },
      { account: tallyKey(k2, 'final'), applied: 1, startedAt: 50 },
      { account: tallyKey(k3, 'final'), applied: 1, startedAt: 90 },
      { account: tallyKey(k4, 'final'), applied: 0, startedAt: 95 },
    ];
    const { figures } = tenantFigures(workload, rows, ledger);
    const burst = figures.perTenant[workload.tenants.burstTenant];
    expect(burst?.committed).toBe(3);
    expect(burst?.maxConcurrent).toBe(3);
    expect(figures.limit).toBe(2);
  });
});

describe('chaos workload: tenant mix', () => {
  it('takes the tenant jobs out of the run size; the burst tenant has two thirds of them', () => {
    const w = planChaosWorkload('run-y', { jobs: 1000, seed: 's', leaseMs: 3000 });
    expect(w.counts.unique).toBe(1000);
    expect(w.tenants.jobs.size).toBe(100);
    expect(w.tenants.perTenant[w.tenants.burstTenant]).toBe(67);
    const expected = new Set(w.expectedDone);
    for (const key of w.tenants.jobs.keys()) expect(expected.has(key)).toBe(true);
    const bodies = w.messages.filter((m) => m.body.includes('"chaos.tenantCredit"'));
    expect(bodies.length).toBeGreaterThanOrEqual(100);
  });
});
