// A cancel whose write landed but whose answer was lost (a 503 after the write; the SDK sends the same
// request again) is refused by its own write: the job store reads the refusal's item (ALL_OLD) and, when
// it shows this very cancel, answers what the write did, not `already-cancelled` (issue 31).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';
import { FaultInjector } from '../../../shared/aws/fault-injector.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { cancelJob } from '../../../shared/ops/cancel.ts';
import { type CoreEnv, coreEnv } from '../../support/core-fixture.ts';
import { testAwsConfig, uniqueName } from '../../support/env.ts';

let env: CoreEnv;
let store: DynamoDbJobStore;

beforeAll(async () => {
  env = await coreEnv('cancellost');
  store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
});
afterAll(() => env?.close());

/** A job under `key` that failed once and waits a minute for its retry. */
async function waitingJob(key: string, now: number): Promise<void> {
  const claimed = await store.claim({
    dedupKey: key,
    owner: 'w-1',
    messageId: 'm-1',
    type: 'test.credit',
    createdAt: new Date(now).toISOString(),
    leaseMs: 10_000,
    now,
  });
  if (!claimed.claimed) throw new Error('not claimed');
  await store.release(claimed.lease, now + 60_000, { message: 'boom', errorClass: 'Error' });
}

/** Cancels `key` through clients whose first UpdateItem lands and then answers 503 (the SDK retries it). */
async function cancelLosingAnswer(key: string, now: number) {
  const lossy = createAwsClients({ ...testAwsConfig(), region: env.region, maxAttempts: 3 });
  const faults = new FaultInjector()
    .attach(lossy)
    .fail({ service: 'DynamoDB', command: 'UpdateItem', times: 1, when: 'after' });
  try {
    const names = {
      queueUrl: env.queueUrl,
      dlqUrl: env.dlqUrl,
      jobsTable: env.jobsTable,
      leasesTable: env.leasesTable,
    };
    const result = await cancelJob({ clients: lossy, names }, key, {
      by: 'ops@host',
      reason: 'sent twice',
      now,
    });
    expect(faults.injected.get('DynamoDB.UpdateItem')).toBe(1);
    return result;
  } finally {
    destroyAwsClients(lossy);
  }
}

describe('Function: cancelJob, when the answer of its write is lost', () => {
  it('reports a waiting job it cancelled as cancelled, not already-cancelled; one cancelled event', async () => {
    // Prepare
    const key = uniqueName('lost');
    const now = Date.now();
    await waitingJob(key, now - 1000);

    // Act
    const result = await cancelLosingAnswer(key, now);

    // Assess
    expect(result).toEqual({ outcome: 'cancelled', status: 'RETRY_WAIT', wasRunning: false });
    const item = await store.get(key);
    expect(item?.status).toBe(JobStatus.Cancelled);
    expect(item?.history?.filter((e) => e.e === 'cancelled')).toHaveLength(1);
  });

  it('reports a running job it cancelled as running', async () => {
    // Prepare: claimed, its lease live.
    const key = uniqueName('lostrun');
    const now = Date.now();
    const claimed = await store.claim({
      dedupKey: key,
      owner: 'w-1',
      messageId: 'm-1',
      type: 'test.credit',
      createdAt: new Date(now).toISOString(),
      leaseMs: 60_000,
      now: now - 1000,
    });
    expect(claimed.claimed).toBe(true);

    // Act, Assess
    expect(await cancelLosingAnswer(key, now)).toEqual({
      outcome: 'cancelled',
      status: 'IN_PROGRESS',
      wasRunning: true,
    });
  });

  it('reports the tombstone it wrote as a tombstone', async () => {
    const key = uniqueName('lostnone');
    expect(await cancelLosingAnswer(key, Date.now())).toEqual({ outcome: 'tombstone' });
  });

  it('still reports a job cancelled before (another cancel) as already-cancelled', async () => {
    // Prepare
    const key = uniqueName('twice');
    const now = Date.now();
    await waitingJob(key, now - 1000);
    await cancelJob(
      {
        clients: env.clients,
        names: {
          queueUrl: env.queueUrl,
          dlqUrl: env.dlqUrl,
          jobsTable: env.jobsTable,
          leasesTable: env.leasesTable,
        },
      },
      key,
      { by: 'someone', now: now - 500 },
    );

    // Act
    const result = await cancelLosingAnswer(key, now);

    // Assess: this cancel wrote nothing (refused), so there was no answer to lose: the first try's refusal.
    expect(result).toEqual({ outcome: 'already-cancelled', status: 'CANCELLED' });
  });
});
