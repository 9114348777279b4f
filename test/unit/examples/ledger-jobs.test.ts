import { describe, expect, it } from 'vitest';
import { credit, transfer } from '../../../examples/ledger/jobs.ts';
import { TransientJobError } from '../../../shared/errors.ts';
import { runJob } from '../../../shared/testing/index.ts';

// The ledger example's jobs, each run in memory through the worker's pipeline with `runJob`
// (leaseq/testing), as an application's own unit tests would.

describe('The ledger example jobs', () => {
  it('ledger.credit opens an account at version 1', async () => {
    const run = await runJob(credit, { account: 'a', amount: 5 });

    expect(run).toMatchObject({ status: 'completed', result: { credited: 5 } });
    expect(run.tables.ledger).toEqual([{ account: 'a', balance: 5, version: 1 }]);
  });

  it('ledger.transfer debits in a step and credits with the completion', async () => {
    const run = await runJob(
      transfer,
      { from: 'a', to: 'b', amount: 3 },
      { tables: { ledger: [{ account: 'a', balance: 10, version: 0 }] } },
    );

    expect(run.status).toBe('completed');
    expect(run.checkpoint?.done).toEqual(['debit']);
    expect(run.tables.ledger).toEqual([
      { account: 'a', balance: 7, version: 1 },
      { account: 'b', balance: 3, version: 1 },
    ]);
  });

  it('ledger.transfer to the same account is dead-lettered at once', async () => {
    const run = await runJob(transfer, { from: 'a', to: 'a', amount: 1 });

    expect(run).toMatchObject({ status: 'dead-lettered', reason: 'permanent-error' });
    expect(run.attempts).toHaveLength(1);
  });

  it('retries a transient failure after its backoff and then completes', async () => {
    const run = await runJob(
      credit,
      { account: 'a', amount: 1 },
      {
        failAttempt: { error: new TransientJobError('ledger service busy') },
      },
    );

    expect(run.status).toBe('completed');
    expect(run.attempts.map((a) => a.action)).toEqual(['retry', 'completed']);
    expect(run.tables.ledger).toEqual([{ account: 'a', balance: 1, version: 1 }]);
  });

  it('debits once when the credit never applies (a row seeded without version), and says why', async () => {
    const run = await runJob(
      transfer,
      { from: 'a', to: 'b', amount: 3 },
      {
        tables: {
          ledger: [
            { account: 'a', balance: 10, version: 0 },
            { account: 'b', balance: 0 },
          ],
        },
      },
    );

    // A row without a version attribute never takes a versionedPut: no other writer is in the way, so
    // the conflict uses the attempts (5 of them, seconds), not the conflict budget (20 give-backs with
    // backoffs up to a minute, three runs each).
    expect(run).toMatchObject({ status: 'dead-lettered', reason: 'max-attempts' });
    expect(run.attempts).toHaveLength(5);
    if (run.status === 'dead-lettered') expect(run.error.message).toContain('row has no version attribute');
    // Five attempts, one debit: the committed step is skipped on every retry.
    expect(run.tables.ledger).toEqual([
      { account: 'a', balance: 7, version: 1 },
      { account: 'b', balance: 0 },
    ]);
  });
});
