import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAwsClients, destroyAwsClients } from '../../../../shared/aws/clients.ts';
import { FaultInjector } from '../../../../shared/aws/fault-injector.ts';
import { RequestCounter } from '../../../../shared/aws/request-counter.ts';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { readDeadLetterAttributes, SqsJobQueue } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { EffectTables } from '../../../../shared/jobs/effect-tables.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  getBalance,
  makeWorker,
  purge,
  queueCounts,
  quietLogger,
  receiveAll,
  sendJob,
} from '../../../support/core-fixture.ts';
import { testEndpoint, uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

// The one-write fast path against the emulator's real DynamoDB transactions and SQS: what a job costs,
// racing copies on competing workers, and the ways a fast attempt ends.

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('fast');
});
afterAll(() => env?.close());
beforeEach(async () => {
  await purge(env, env.queueUrl);
  await purge(env, env.dlqUrl);
});

/** A worker whose own clients count (and may fail) its requests. Call `close()` when done. */
function countedWorker(fastPath: boolean) {
  const clients = createAwsClients({ endpoint: testEndpoint(), region: env.region });
  const counter = new RequestCounter().attach(clients);
  const faults = new FaultInjector().attach(clients);
  const { registry, log } = testRegistry(env, undefined, { fastPath });
  const metrics = new InMemoryMetrics();
  const processor = new JobProcessor({
    store: new DynamoDbJobStore({ client: clients.doc, tableName: env.jobsTable }),
    queue: new SqsJobQueue({ client: clients.sqs, queueUrl: env.queueUrl, deadLetterQueueUrl: env.dlqUrl }),
    registry,
    tables: new EffectTables(clients.doc, { ledger: env.ledgerTable }),
    worker: uniqueName('w'),
    logger: quietLogger(),
    metrics,
    leaseMs: 3000,
    backoff: { baseSeconds: 1, capSeconds: 1 },
  });
  return { processor, counter, faults, metrics, log, close: () => destroyAwsClients(clients) };
}

/** Receives what is visible (up to 50 messages), hidden for 30 s, as the event source hands them over. */
async function receiveRecords() {
  const messages = await receiveAll(env, env.queueUrl, 30, 1);
  return messages.map((m) => toSqsRecord(m, env.queueArn, env.region));
}

describe('The one-write fast path (against the emulator)', () => {
  it('costs a unique job one DynamoDB write where the leased path makes two', async () => {
    const account = uniqueName('acct');
    const fast = countedWorker(true);
    const leased = countedWorker(false);
    for (const worker of [fast, leased]) {
      for (let i = 0; i < 4; i++) {
        await sendJob(env, {
          dedupKey: uniqueName('order'),
          type: 'test.credit',
          payload: { account, amount: 1 },
        });
      }
      for (const record of await receiveRecords()) {
        expect((await worker.processor.process(record)).action).toBe('completed');
      }
    }
    fast.close();
    leased.close();

    // (The job's own read of the account goes through the test's clients, uncounted.)
    expect(fast.counter.snapshot()).toEqual({ 'DynamoDB.TransactWriteItems': 4 });
    expect(leased.counter.snapshot()).toEqual({
      'DynamoDB.TransactWriteItems': 4,
      'DynamoDB.UpdateItem': 4,
    });
    expect((await getBalance(env, account))?.balance).toBe(8);
  });

  it('applies each effect once when racing copies run on competing workers at the same time', async () => {
    const { registry, log } = testRegistry(env, undefined, { fastPath: true });
    const workers = [makeWorker(env, registry), makeWorker(env, registry), makeWorker(env, registry)];
    const account = uniqueName('acct');
    const keys = Array.from({ length: 5 }, () => uniqueName('order'));
    for (const key of keys) {
      for (let copy = 0; copy < 4; copy++) {
        await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 10 } });
      }
    }
    // Each worker takes a share of the copies and runs them all at once.
    const records = await receiveRecords();
    expect(records).toHaveLength(20);
    const outcomes = await Promise.all(
      records.map((record, i) => workers[i % workers.length]?.processor.process(record)),
    );
    // On a loaded machine a holder's commit can fail (a transaction conflict with a racing copy): it keeps
    // its message and retries, while the racing copies were dropped. The redelivery completes the job.
    for (let round = 0; round < 20 && outcomes.some((o) => o?.action === 'retry'); round++) {
      const done = new Set(outcomes.filter((o) => o?.action === 'completed').map((o) => o?.dedupKey));
      if (keys.every((key) => done.has(key))) break;
      for (const record of await receiveRecords()) outcomes.push(await workers[0]?.processor.process(record));
    }

    expect((await getBalance(env, account))?.balance).toBe(50);
    const actions = outcomes.map((o) => o?.action);
    expect(actions.filter((a) => a === 'completed')).toHaveLength(5);
    expect(actions.filter((a) => a !== 'completed').every((a) => a === 'duplicate' || a === 'retry')).toBe(
      true,
    );
    for (const key of keys) {
      expect(log.count(key)).toBeGreaterThanOrEqual(1);
      expect(await workers[0]?.store.get(key)).toMatchObject({ status: JobStatus.Completed });
    }
  });

  it('records a failed fast attempt under a lease and completes the redelivery leased', async () => {
    const worker = countedWorker(true);
    const account = uniqueName('acct');
    const key = uniqueName('flaky');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 3, failTimes: 1 } });

    const [first] = await receiveRecords();
    if (!first) throw new Error('no message');
    expect((await worker.processor.process(first)).action).toBe('retry');
    expect(worker.metrics.get(MetricName.FastPathFallback, { jobType: 'test.credit' })).toBe(1);
    const [again] = await receiveRecords();
    if (!again) throw new Error('the message did not come back');
    expect(again.attributes.ApproximateReceiveCount).toBe('2');
    expect((await worker.processor.process(again)).action).toBe('completed');
    worker.close();

    expect((await getBalance(env, account))?.balance).toBe(3);
    const item = await makeWorker(env, testRegistry(env).registry).store.get(key);
    expect(item).toMatchObject({ status: JobStatus.Completed, attempts: 2 });
  });

  it('treats a lost answer of the one write as done: the effect lands once and the copy is deleted', async () => {
    const worker = countedWorker(true);
    worker.faults.fail({ service: 'DynamoDB', command: 'TransactWriteItems', times: 1, when: 'after' });
    const account = uniqueName('acct');
    const key = uniqueName('lost');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 4 } });
    const [record] = await receiveRecords();
    if (!record) throw new Error('no message');

    const outcome = await worker.processor.process(record);
    worker.close();

    expect(worker.faults.injected.get('DynamoDB.TransactWriteItems')).toBe(1);
    expect(outcome).toMatchObject({ action: 'completed', disposition: 'delete' });
    expect((await getBalance(env, account))?.balance).toBe(4);
  });

  it('dead-letters a permanent failure with its reason, and the queue ends empty', async () => {
    const { registry } = testRegistry(env, undefined, { fastPath: true });
    const worker = makeWorker(env, registry);
    const key = uniqueName('poison');
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account: uniqueName('acct'), amount: 1, permanent: true },
    });

    for (let i = 0; i < 5 && (await queueCounts(env)).visible + (await queueCounts(env)).inFlight > 0; i++) {
      await worker.poll(1);
    }

    expect(await worker.store.get(key)).toMatchObject({ status: JobStatus.Dead });
    const letters = await receiveAll(env, env.dlqUrl, 5);
    expect(letters).toHaveLength(1);
    expect(readDeadLetterAttributes(letters[0]?.MessageAttributes)).toMatchObject({
      reason: 'permanent-error',
    });
  });
});
