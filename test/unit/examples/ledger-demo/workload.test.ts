import { describe, expect, it } from 'vitest';
import { planWorkload } from '../../../../examples/ledger/demo/workload.ts';
import { seededRandom } from '../../../../examples/ledger/generate.ts';
import { parseEnvelope } from '../../../../shared/core/contract/envelope.ts';

describe('Function: planWorkload', () => {
  const plan = planWorkload('run-t', {
    jobs: 200,
    accounts: 5,
    duplicateRate: 0.25,
    poison: 3,
    crashes: 2,
    slow: 4,
    flakyRate: 0.1,
    random: seededRandom('workload-test'),
  });
  const envelopes = plan.messages.flatMap((m) => {
    try {
      return [parseEnvelope(m.body)];
    } catch {
      return [];
    }
  });
  const simulated = (what: string) =>
    new Set(
      envelopes
        .filter((e) => JSON.stringify((e.payload as { simulate?: unknown }).simulate ?? {}).includes(what))
        .map((e) => e.dedupKey),
    );

  it('sends every job once, the chosen share twice, and one body that is not JSON', () => {
    expect(plan.counts.duplicates).toBe(50);
    expect(plan.messages).toHaveLength(200 + 50 + 1);
    expect(envelopes).toHaveLength(250);
    expect(new Set(envelopes.map((e) => e.dedupKey)).size).toBe(200);
  });

  it('mixes in exactly the asked poison, crashing and slow jobs; crashes are transfers', () => {
    expect(simulated('permanent').size).toBe(3);
    expect(simulated('crashAfterStep').size).toBe(2);
    expect(simulated('sleepMs').size).toBe(4);
    expect(simulated('failTimes').size).toBe(plan.counts.flaky);
    for (const e of envelopes) {
      if (simulated('crashAfterStep').has(e.dedupKey)) expect(e.type).toBe('ledger.transfer');
    }
    expect([...plan.expectedDead].sort()).toEqual([...simulated('permanent')].sort());
    expect(plan.expectedDone).toHaveLength(197);
  });

  it('expects each non-poison job once in the ledger: transfers conserve money, credits add it', () => {
    const unique = new Map(envelopes.map((e) => [e.dedupKey, e]));
    let credits = 0;
    for (const key of plan.expectedDone) {
      const e = unique.get(key);
      if (e?.type === 'ledger.credit') credits += (e.payload as { amount: number }).amount;
    }
    const total = Object.values(plan.expectedBalances).reduce((a, b) => a + b, 0);
    expect(total).toBe(5 * 1000 + credits);
  });
});
