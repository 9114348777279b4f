// Cancel by filter on a FIFO queue: a job waiting for its retry heads its message group (its message is
// only hidden for the backoff), so the job sent behind it in the group waits too. Cancelled by filter, its
// message is dropped when it comes back, and the job behind it runs.
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { bulkCancel, previewBulkCancel } from '../../../shared/ops/bulk-cancel.ts';
import { type CoreEnv, coreEnv, eventually, makeWorker } from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { untilIndexed } from '../../support/problems-index.ts';
import { testRegistry } from '../../support/test-jobs.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('bulkfifo', { fifo: true });
});
afterAll(() => env?.close());

async function sendInGroup(group: string, dedupKey: string, payload: unknown): Promise<void> {
  await env.clients.sqs.send(
    new SendMessageCommand({
      QueueUrl: env.queueUrl,
      MessageBody: JSON.stringify(
        makeEnvelope({ id: uniqueName('m'), dedupKey, type: 'test.credit', payload }),
      ),
      MessageGroupId: group,
      MessageDeduplicationId: uniqueName('d'),
    }),
  );
}

describe('cancel by filter on a FIFO queue', () => {
  it('a cancelled job at the head of its group is dropped when it comes back, and the job behind it runs', async () => {
    // Prepare: A fails every attempt (it would head the group for all its attempts), B waits behind it.
    const group = uniqueName('g');
    const a = uniqueName('head');
    const b = uniqueName('behind');
    await sendInGroup(group, a, { account: uniqueName('acct'), amount: 1, failTimes: 99 });
    await sendInGroup(group, b, { account: uniqueName('acct'), amount: 1 });
    const worker = makeWorker(env, testRegistry(env).registry, { maxAttempts: 99 });
    await eventually(async () => {
      await worker.poll();
      return (await worker.store.get(a))?.status === JobStatus.RetryWait;
    }, 20_000);
    await untilIndexed(env.clients.doc, env.jobsTable, [a], { status: JobStatus.RetryWait });
    expect(await worker.store.get(b)).toBeUndefined();

    // Act
    const preview = await previewBulkCancel(
      {
        clients: env.clients,
        names: {
          queueUrl: env.queueUrl,
          dlqUrl: env.dlqUrl,
          jobsTable: env.jobsTable,
          leasesTable: env.leasesTable,
        },
      },
      { type: 'test.credit', since: Date.now() - 60_000 },
    );
    const report = await bulkCancel(
      {
        clients: env.clients,
        names: {
          queueUrl: env.queueUrl,
          dlqUrl: env.dlqUrl,
          jobsTable: env.jobsTable,
          leasesTable: env.leasesTable,
        },
      },
      preview,
      { by: 'hana' },
    );
    const ran = await eventually(async () => {
      await worker.poll();
      return (await worker.store.get(b))?.status === JobStatus.Completed;
    }, 30_000);

    // Assess
    expect(preview.jobs.map((j) => j.dedupKey)).toEqual([a]);
    expect(report).toMatchObject({ cancelled: 1, refused: 0 });
    expect(ran).toBe(true);
    expect((await worker.store.get(a))?.status).toBe(JobStatus.Cancelled);
    expect(worker.metrics.counters.get('CancelledCopyDropped')).toBeGreaterThanOrEqual(1);
  });
});
