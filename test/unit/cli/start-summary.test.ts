import { describe, expect, it } from 'vitest';
import { summary } from '../../../cli/commands/start.ts';
import type { DemoResult } from '../../../examples/ledger/demo/run-demo.ts';

/** A finished demo run: 4 poison jobs dead-lettered, plus the one malformed body every run sends. */
function run(over: Partial<DemoResult> = {}): DemoResult {
  const poison = (i: number, copies = 1) => ({
    dedupKey: `run-1-poison-${i}`,
    reason: 'max-attempts',
    errorClass: 'Error',
    attempts: '3',
    copies,
  });
  return {
    runId: 'run-1',
    runtime: 'local',
    workload: { messages: 12, unique: 10, duplicates: 1, flaky: 0, slow: 0, crashes: 0, poison: 4 },
    completed: 6,
    deadLettered: 4,
    missing: [],
    accounts: [],
    moneyExpected: 0,
    moneyActual: 0,
    deadLetters: [
      {
        dedupKey: '(not a job envelope)',
        reason: 'invalid-not-json',
        errorClass: 'InvalidEnvelopeError',
        attempts: '0',
        copies: 1,
      },
      poison(1),
      poison(2),
      poison(3),
      poison(4),
    ],
    counters: {},
    perWorker: [],
    workerRestarts: 0,
    elapsedMs: 1000,
    timedOut: false,
    aborted: false,
    verified: true,
    ...over,
  };
}

describe('Function: summary (leaseq start)', () => {
  it('says how many letters the DLQ holds beside the dead jobs, and which letter is no job', () => {
    // Act
    const text = summary(run(), 'http://127.0.0.1:4566');

    // Assess: "dead 4" and the 5 letters listed agree: 4 jobs' letters and the malformed body's.
    expect(text).toContain(
      "  dead        4 jobs dead-lettered (expected 4); the DLQ holds 5 letters: 4 of those jobs', 1 of the malformed body (no job)",
    );
    expect(text).toContain('  dead letters (5 in the DLQ, with their reasons):');
    expect(text).toMatch(/\(not a job envelope\).*the malformed body: never a job, so no job item/);
  });

  it('counts a second letter of one death as a letter, not a job', () => {
    // Prepare
    const twice = run({
      deadLetters: run().deadLetters.map((d, i) => (i === 1 ? { ...d, copies: 2 } : d)),
    });

    // Act
    const text = summary(twice, 'http://127.0.0.1:4566');

    // Assess
    expect(text).toContain("the DLQ holds 6 letters: 5 of those jobs', 1 of the malformed body (no job)");
    expect(text).toContain('(2 letters: its worker died while dead-lettering)');
  });
});
