import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { createAwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';
import { FaultInjector } from '../../../shared/aws/fault-injector.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { redrive } from '../../../shared/ops/dlq-redrive.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  makeWorker,
  queueCounts,
  sendJob,
} from '../../support/core-fixture.ts';
import { testAwsConfig, uniqueName } from '../../support/env.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('redrive');
});
afterAll(() => env?.close());

describe('Function: redrive (under faults, against the emulator)', () => {
  it('loses nothing when the send back fails: the letter stays, the next redrive sends it, the job runs once', async () => {
    // Prepare: a job that fails once dies at once under maxAttempts 1.
    const registry = ledgerJobs;
    const strict = makeWorker(env, registry, { maxAttempts: 1 });
    const key = uniqueName('redrive');
    const account = uniqueName('acct');
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account, amount: 7, simulate: { failTimes: 1 } },
    });
    expect(
      await eventually(
        async () => {
          await strict.poll(1);
          return (await strict.store.get(key))?.status === JobStatus.Dead;
        },
        20_000,
        0,
      ),
    ).toBe(true);
    const names = {
      queueUrl: env.queueUrl,
      dlqUrl: env.dlqUrl,
      jobsTable: env.jobsTable,
      leasesTable: env.leasesTable,
    };

    // Act 1: the SendMessage back to the jobs queue fails.
    const faulty = createAwsClients({ ...testAwsConfig(), region: env.region, maxAttempts: 1 });
    const faults = new FaultInjector()
      .attach(faulty)
      .fail({ service: 'SQS', command: 'SendMessage', times: 1 });
    const first = await redrive({ clients: faulty, names });
    destroyAwsClients(faulty);

    // Assess 1: reported, letter kept, the reset undone (no message would bring a reset job back), nothing sent.
    expect(faults.injected.get('SQS.SendMessage')).toBe(1);
    expect(first).toMatchObject({ matched: 1, redriven: 0, failed: 1 });
    expect((await strict.store.get(key))?.status).toBe(JobStatus.Dead);
    expect(await queueCounts(env, env.dlqUrl)).toMatchObject({ visible: 1 });
    expect(await queueCounts(env)).toMatchObject({ visible: 0, inFlight: 0 });

    // Act 2: the next redrive sends it; a worker allowing retries runs it.
    const second = await redrive({ clients: env.clients, names });
    expect(second).toMatchObject({ matched: 1, redriven: 1, failed: 0 });
    expect(await queueCounts(env, env.dlqUrl)).toMatchObject({ visible: 0, inFlight: 0 });
    const lenient = makeWorker(env, registry, { maxAttempts: 3 });
    expect(
      await eventually(
        async () => {
          await lenient.poll(1);
          return (await lenient.store.get(key))?.status === JobStatus.Completed;
        },
        30_000,
        0,
      ),
    ).toBe(true);

    // Assess 2: the effect happened once.
    expect((await getBalance(env, account))?.balance).toBe(7);
  });
});
