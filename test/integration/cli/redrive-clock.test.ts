import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { redrive } from '../../../shared/ops/dlq-redrive.ts';
import { REDRIVE_CLOCK_MARGIN_MS } from '../../../shared/ops/dlq-redrive-plan.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  purge,
  queueCounts,
  sendJob,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('rclock');
});
afterEach(async () => {
  await purge(env, env.queueUrl);
  await purge(env, env.dlqUrl);
});
afterAll(() => env?.close());

const MINUTE = 60_000;

/**
 * A job whose letter is in the DLQ while its item is IN_PROGRESS under `owner` until `leaseUntil`: the
 * worker's dead marking failed and a duplicate of the message claimed it (or its worker died).
 */
async function letterOfClaimedJob(owner: string, leaseUntil: number): Promise<string> {
  const strict = makeWorker(env, ledgerJobs, { maxAttempts: 1 });
  const key = uniqueName('clock');
  await sendJob(env, {
    dedupKey: key,
    type: 'ledger.credit',
    payload: { account: uniqueName('a'), amount: 1, simulate: { failTimes: 1 } },
  });
  expect(
    await eventually(async () => {
      await strict.poll(1);
      return (await strict.store.get(key))?.status === JobStatus.Dead;
    }, 20_000),
  ).toBe(true);
  await env.clients.doc.send(
    new UpdateCommand({
      TableName: env.jobsTable,
      Key: { dedupKey: key },
      UpdateExpression: 'SET #status = :inProgress, #owner = :owner, #leaseUntil = :leaseUntil',
      ExpressionAttributeNames: { '#status': 'status', '#owner': 'owner', '#leaseUntil': 'leaseUntil' },
      ExpressionAttributeValues: {
        ':inProgress': JobStatus.InProgress,
        ':owner': owner,
        ':leaseUntil': leaseUntil,
      },
    }),
  );
  return key;
}

function names() {
  return {
    queueUrl: env.queueUrl,
    dlqUrl: env.dlqUrl,
    jobsTable: env.jobsTable,
    leasesTable: env.leasesTable,
  };
}

describe('Function: redrive, with the operator clock off', () => {
  it('leaves a live job alone when the operator clock runs 10 minutes ahead', async () => {
    // Prepare: a live lease, 60 s left by the store's (the real) clock.
    const store = makeWorker(env, ledgerJobs).store;
    const key = await letterOfClaimedJob('live-worker', Date.now() + MINUTE);

    // Act: the operator's laptop clock is 10 minutes fast.
    const report = await redrive(
      { clients: env.clients, names: names() },
      { now: () => Date.now() + 10 * MINUTE },
    );

    // Assess: skipped, the item untouched, the letter still in the DLQ, nothing sent.
    expect(report).toMatchObject({ matched: 1, redriven: 0, skipped: 1 });
    const item = await store.get(key);
    expect(item).toMatchObject({ status: JobStatus.InProgress, owner: 'live-worker', attempts: 1 });
    expect(await queueCounts(env, env.dlqUrl)).toMatchObject({ visible: 1 });
    expect(await queueCounts(env)).toMatchObject({ visible: 0, inFlight: 0 });
  });

  it('the store refuses the reset too, by the same margin, if a worker claims the job after the read', async () => {
    // Prepare: claimed by a live worker (60 s left by the real clock) after the redrive read the item.
    const store = makeWorker(env, ledgerJobs).store;
    const key = await letterOfClaimedJob('live-worker', Date.now() + MINUTE);

    // Act: the reset as redrive sends it, from a clock 10 minutes ahead.
    const ahead = Date.now() + 10 * MINUTE;
    const reset = await store.resetForRedrive(key, ahead, ahead - REDRIVE_CLOCK_MARGIN_MS);

    // Assess
    expect(reset).toBe(false);
    expect(await store.get(key)).toMatchObject({ status: JobStatus.InProgress, owner: 'live-worker' });
  });

  it('still resets and sends a job whose lease ended long ago (its worker died)', async () => {
    // Prepare
    const store = makeWorker(env, ledgerJobs).store;
    const key = await letterOfClaimedJob('dead-worker', Date.now() - 60 * MINUTE);

    // Act
    const report = await redrive({ clients: env.clients, names: names() });

    // Assess
    expect(report).toMatchObject({ matched: 1, redriven: 1 });
    expect(report.items[0]?.reset).toBe(true);
    expect(await store.get(key)).toMatchObject({ status: JobStatus.RetryWait, attempts: 0 });
  });
});
