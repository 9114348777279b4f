import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { credit } from '../../../../examples/ledger/jobs.ts';
import { ledgerTable } from '../../../../examples/ledger/ledger.ts';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { keyFingerprint } from '../../../../shared/core/model/conflict.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import {
  type CoreEnv,
  coreEnv,
  getBalance,
  makeWorker,
  receiveAll,
  sendJob,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { freshQueues } from '../../../support/fresh-queues.ts';

// Issue 20 item 4 against the emulator's real conditions: an optimistic conflict that outlasts its tries
// names the table, the key, the version the job expected and the one found, and a row seeded without a
// `version` attribute says so (the versionedPut trap). The in-memory twin is in
// test/unit/testing/run-job.test.ts.

let base: CoreEnv;
let env: CoreEnv;

beforeAll(async () => {
  base = await coreEnv('conflict');
});
afterAll(() => base?.close());
beforeEach(async () => {
  env = await freshQueues(base);
});

async function seed(item: Record<string, unknown>): Promise<void> {
  await env.clients.doc.send(new PutCommand({ TableName: env.ledgerTable, Item: item }));
}

/** Runs one `ledger.credit` of `account` to its end with one attempt; returns its dead letter's attributes. */
async function creditOnce(account: string): Promise<Record<string, string>> {
  const worker = makeWorker(env, JobRegistry.of([credit]), { maxAttempts: 1, maxConflicts: 0 });
  await sendJob(env, { dedupKey: uniqueName('credit'), type: credit.type, payload: { account, amount: 5 } });
  await worker.poll(2);
  const letters = await receiveAll(env, env.dlqUrl, 30, 2);
  expect(letters).toHaveLength(1);
  return readDeadLetterAttributes(letters[0]?.MessageAttributes);
}

describe('Optimistic conflicts on the emulator say what conflicted', () => {
  it('explains a row seeded without a version attribute: table, key, and the fix', async () => {
    const account = uniqueName('noversion');
    await seed({ account, balance: 10 });

    const letter = await creditOnce(account);

    // No other writer is in the way (the row has no version): the conflict uses the attempt.
    expect(letter.reason).toBe('max-attempts');
    expect(letter.errorClass).toBe('OptimisticConflictError');
    expect(letter.errorMessage).toContain(`table ${env.ledgerTable}`);
    // The key as a fingerprint: the text lands in logs and letters, which carry no payload contents.
    expect(letter.errorMessage).toContain(`key ${keyFingerprint({ account })}`);
    expect(letter.errorMessage).not.toContain(account);
    expect(letter.errorMessage).toContain('expected no item');
    expect(letter.errorMessage).toContain(
      'row has no version attribute: seed rows with version 0 or use put',
    );
    // Nothing was written.
    expect(await getBalance(env, account)).toEqual({ account, balance: 10 });
  }, 180_000);

  it('names the version expected and the version found for a stale read', async () => {
    const account = uniqueName('stale');
    await seed({ account, balance: 10, version: 4 });
    // A job that read the row at version 3: its write can never apply.
    const stale = defineJob({
      type: 'ledger.stale',
      payload: z.object({ account: z.string() }),
      tables: { ledger: ledgerTable },
      async run(ctx, p) {
        return {
          effects: [
            ctx.tables.ledger.versionedPut({ key: { account: p.account }, seenVersion: 3, item: {} }),
          ],
        };
      },
    });
    const worker = makeWorker(env, JobRegistry.of([stale]), { maxAttempts: 1, maxConflicts: 0 });
    await sendJob(env, { dedupKey: uniqueName('stale'), type: stale.type, payload: { account } });
    await worker.poll(2);
    const letters = await receiveAll(env, env.dlqUrl, 30, 2);
    const letter = readDeadLetterAttributes(letters[0]?.MessageAttributes);

    expect(letter.errorMessage).toContain(
      `versionedPut to table ${env.ledgerTable} key ${keyFingerprint({ account })}: expected version 3, found version 4`,
    );
  }, 180_000);
});
