/**
 * The inspector's fix-and-redrive on a FIFO stack, against the emulator: a dead job's payload edited
 * from the page goes back to the FIFO jobs queue (its group, a deduplication id of its own, within the
 * 5 minutes of the original's) and runs to completion with the edited payload.
 */
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUiApp } from '../../../cli/ui/app.ts';
import { SpanBuffer } from '../../../cli/ui/spans.ts';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { lettersOfJob } from '../../../shared/ops/job-letters.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  makeWorker,
  queueCounts,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';

const PORT = 8687;
const HOST = 'fixfifo.leaseq.localhost';
const ORIGIN = `http://${HOST}:${PORT}`;
let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('cliuififo', { fifo: true });
});
afterAll(() => env?.close());

const target = () => ({
  clients: env.clients,
  names: {
    queueUrl: env.queueUrl,
    dlqUrl: env.dlqUrl,
    jobsTable: env.jobsTable,
    leasesTable: env.leasesTable,
  },
});

async function drain(worker: ReturnType<typeof makeWorker>): Promise<void> {
  const done = await eventually(
    async () => {
      await worker.poll();
      const q = await queueCounts(env);
      return q.visible + q.inFlight + q.delayed === 0;
    },
    30_000,
    100,
  );
  expect(done).toBe(true);
}

describe('leaseq ui: fix and redrive on a FIFO stack', () => {
  it('redrives a dead FIFO job with the edited payload at once, and it completes with it', async () => {
    const app = createUiApp({
      target: target() as never,
      targetLine: 'test',
      token: 'fifo-token',
      host: HOST,
      traceToken: 'trace',
      port: () => PORT,
      readOnly: false,
      spans: new SpanBuffer(10),
      jobs: { path: 'examples/ledger/jobs.ts', jobs: ledgerJobs },
    });
    const traded = await app.request(`${ORIGIN}/?token=fifo-token`, { headers: { host: `${HOST}:${PORT}` } });
    const cookie = (traded.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const account = uniqueName('acct');
    const key = uniqueName('fifo');
    await env.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.queueUrl,
        MessageBody: JSON.stringify(
          makeEnvelope({
            id: uniqueName('m'),
            dedupKey: key,
            type: 'ledger.credit',
            payload: { account, amount: 5, simulate: { failTimes: 1 } },
          }),
        ),
        MessageGroupId: uniqueName('g'),
        MessageDeduplicationId: key,
      }),
    );
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-strict', maxAttempts: 1 }));
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    expect((await store.get(key))?.status).toBe(JobStatus.Dead);
    const { letters } = await lettersOfJob(target() as never, key);
    expect(letters.length).toBe(1);
    const answer = await app.request(`${ORIGIN}/jobs/${encodeURIComponent(key)}/fix`, {
      method: 'POST',
      headers: {
        host: `${HOST}:${PORT}`,
        origin: ORIGIN,
        cookie,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({
        letter: letters[0]?.messageId ?? '',
        payload: JSON.stringify({ account, amount: 7 }),
        confirmed: 'yes',
      }).toString(),
    });
    expect(await answer.text()).toContain(`Job ${key} was redriven with the edited payload.`);
    const q = await queueCounts(env);
    expect(q.visible + q.inFlight + q.delayed).toBe(1);
    await drain(makeWorker(env, ledgerJobs, { worker: 'w-after', maxAttempts: 3 }));
    expect((await store.get(key))?.status).toBe(JobStatus.Completed);
    expect((await getBalance(env, account))?.balance).toBe(7);
  });
});
