import { describe, expect, it } from 'vitest';
import { dedupKeyFor, generateJobs } from '../../../examples/ledger/generate.ts';
import { parseEnvelope } from '../../../shared/core/contract/envelope.ts';
import { chunk } from '../../../shared/producer/send-messages.ts';

/** A deterministic random source (LCG) so the tests do not depend on luck. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

describe('Function: generateJobs', () => {
  it('makes count distinct jobs and exactly round(count * rate) duplicate sends', () => {
    for (const [count, rate] of [
      [20, 0.25],
      [2000, 0.2],
      [7, 0.5],
      [10, 0],
      [10, 1],
    ] as const) {
      // Act
      const out = generateJobs({ count, duplicateRate: rate, random: seeded(count), runId: 'r1' });
      // Assess
      const keys = out.messages.map((m) => m.dedupKey);
      expect(out.jobs).toHaveLength(count);
      expect(new Set(out.jobs.map((j) => j.dedupKey)).size).toBe(count);
      expect(out.duplicates).toBe(Math.round(count * rate));
      expect(out.messages).toHaveLength(count + out.duplicates);
      expect(out.messages.filter((m) => m.duplicate)).toHaveLength(out.duplicates);
      expect(new Set(keys).size).toBe(count);
      // No job is sent more than twice.
      const perKey = new Map<string, number>();
      for (const key of keys) perKey.set(key ?? '', (perKey.get(key ?? '') ?? 0) + 1);
      expect(Math.max(...perKey.values(), 0)).toBeLessThanOrEqual(2);
    }
  });

  it('sends each duplicate after its original, with the same body', () => {
    const out = generateJobs({ count: 200, duplicateRate: 0.3, random: seeded(3), runId: 'r2' });
    const firstAt = new Map<string, number>();
    out.messages.forEach((m, i) => {
      const key = m.dedupKey ?? '';
      if (!m.duplicate) {
        firstAt.set(key, i);
        return;
      }
      const first = firstAt.get(key);
      expect(first, `duplicate of ${key} came before its original`).toBeDefined();
      expect(out.messages[first ?? 0]?.body).toBe(m.body);
    });
  });

  it('writes valid envelopes: dedup keys from the run id, small positive amounts, two distinct accounts per transfer', () => {
    const out = generateJobs({ count: 300, random: seeded(9), runId: 'run-x', accounts: 3, maxAmount: 5 });
    expect(out.accounts).toEqual(['run-x-acct-1', 'run-x-acct-2', 'run-x-acct-3']);
    out.messages.forEach((m, i) => {
      const envelope = parseEnvelope(m.body);
      expect(envelope.dedupKey).toBe(dedupKeyFor('run-x', i));
      const p = envelope.payload as { amount: number; account?: string; from?: string; to?: string };
      expect(Number.isInteger(p.amount) && p.amount >= 1 && p.amount <= 5).toBe(true);
      if (envelope.type === 'ledger.transfer') {
        expect(p.from).not.toBe(p.to);
        expect(out.accounts).toContain(p.from);
        expect(out.accounts).toContain(p.to);
      } else {
        expect(envelope.type).toBe('ledger.credit');
        expect(out.accounts).toContain(p.account);
      }
    });
    const types = new Set(out.jobs.map((j) => j.type));
    expect(types).toEqual(new Set(['ledger.credit', 'ledger.transfer']));
  });

  it('keeps to the types asked for', () => {
    const out = generateJobs({ count: 50, types: ['ledger.credit'], accounts: 1, random: seeded(1) });
    expect(new Set(out.jobs.map((j) => j.type))).toEqual(new Set(['ledger.credit']));
  });

  it('refuses values out of range', () => {
    expect(() => generateJobs({ count: -3 })).toThrow('count must be an integer >= 0, received -3');
    expect(() => generateJobs({ count: 5, duplicateRate: 2 })).toThrow('duplicateRate must be in 0..1');
    expect(() => generateJobs({ count: 5, accounts: 1 })).toThrow(/a transfer needs two/);
    expect(() => generateJobs({ count: 5, types: [] })).toThrow(/at least one job type/);
  });
});

describe('Function: chunk', () => {
  it('cuts at the entry count and at 256 KiB of bodies', () => {
    const small = Array.from({ length: 25 }, (_, i) => ({ body: `m${i}` }));
    expect(chunk(small, 10).map((b) => b.length)).toEqual([10, 10, 5]);
    const big = Array.from({ length: 5 }, () => ({ body: 'x'.repeat(100 * 1024) }));
    expect(chunk(big, 10).map((b) => b.length)).toEqual([2, 2, 1]);
    expect(chunk([], 10)).toEqual([]);
  });
});

describe('Function: generateJobs with a run id', () => {
  it('regenerates the very same jobs for the same run id (a resend is pure duplicates)', () => {
    const a = generateJobs({ count: 30, duplicateRate: 0.2, runId: 'run-fixed', now: new Date(0) });
    const b = generateJobs({ count: 30, duplicateRate: 0.2, runId: 'run-fixed', now: new Date(0) });
    const bodies = (g: typeof a) => g.messages.map((m) => JSON.parse(m.body).payload);
    expect(bodies(b)).toEqual(bodies(a));
    const c = generateJobs({ count: 30, duplicateRate: 0.2, runId: 'run-other', now: new Date(0) });
    expect(bodies(c)).not.toEqual(bodies(a));
  });
});
