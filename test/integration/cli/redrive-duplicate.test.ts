import { type MessageAttributeValue, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import type { RedriveReport } from '../../../shared/ops/dlq-redrive.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  receiveAll,
  sendJob,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { leaseqJson } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('redrivedup');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

describe('Command: leaseq dlq redrive, with two letters of one death (docs/protocol.md, dead-lettering step by step)', () => {
  it('sends the job back once and reports the other letter as a duplicate, not as the job dead again; the duplicate stays', async () => {
    // Prepare: a poison job dead-lettered, then the second letter a takeover sends when the first
    // dead-lettering was cut short after its letter (same message, same reason attributes).
    const poison = uniqueName('poison');
    await sendJob(env, {
      dedupKey: poison,
      type: 'ledger.credit',
      payload: { account: uniqueName('acct'), amount: 1, simulate: { permanent: true } },
    });
    const worker = makeWorker(env, ledgerJobs, { worker: 'w-dup' });
    const drained = await eventually(
      async () => {
        await worker.poll();
        const q = await queueCounts(env);
        return q.visible + q.inFlight + q.delayed === 0;
      },
      30_000,
      100,
    );
    expect(drained).toBe(true);
    const [first] = await receiveAll(env, env.dlqUrl, 0);
    await env.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.dlqUrl,
        MessageBody: first?.Body ?? '',
        MessageAttributes: first?.MessageAttributes as Record<string, MessageAttributeValue>,
      }),
    );
    expect(await queueCounts(env, env.dlqUrl)).toMatchObject({ visible: 2 });
    expect((await worker.store.get(poison))?.status).toBe(JobStatus.Dead);

    // Act
    const report = await leaseqJson<RedriveReport>([
      'dlq',
      'redrive',
      '--dedup-key',
      poison,
      '--prefix',
      prefix,
      '--yes',
    ]);

    // Assess: one send, one duplicate kept (a second letter is not a new death), nothing dead again.
    expect(report).toMatchObject({ matched: 2, redriven: 1, deadAgain: 0, duplicates: 1, failed: 0 });
    const duplicate = report.items.find((i) => i.outcome === 'duplicate');
    expect(duplicate?.detail).toMatch(/second letter of the death this redrive sent back/);
    expect(await worker.store.get(poison)).toMatchObject({ status: JobStatus.RetryWait, attempts: 0 });
    expect(await queueCounts(env)).toMatchObject({ visible: 1 });
    expect(await queueCounts(env, env.dlqUrl)).toEqual({ visible: 1, inFlight: 0, delayed: 0 });
  }, 180_000);
});
