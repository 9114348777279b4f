import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CapacityMeter } from '../../../../bench/compare/capacity.ts';
import { createAwsClients, destroyAwsClients } from '../../../../shared/aws/clients.ts';
import { FaultInjector } from '../../../../shared/aws/fault-injector.ts';
import { RequestCounter } from '../../../../shared/aws/request-counter.ts';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { readDeadLetterAttributes, SqsJobQueue } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
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
import { testAwsConfig, uniqueName } from '../../../support/env.ts';
import { RunLog, testRegistry } from '../../../support/test-jobs.ts';

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
function countedWorker(fastPath: boolean, jobs = testRegistry(env, undefined, { fastPath })) {
  const clients = createAwsClients({ ...testAwsConfig(), region: env.region });
  const counter = new RequestCounter().attach(clients);
  const capacity = new CapacityMeter().attach(clients);
  const faults = new FaultInjector().attach(clients);
  const { registry, log } = jobs;
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
  return { processor, counter, capacity, faults, metrics, log, close: () => destroyAwsClients(clients) };
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

  it('completes a job with no DynamoDB effects in one UpdateItem of 1 WRU, on both paths', async () => {
    // A job whose effect is outside DynamoDB (a webhook, an e-mail): it returns nothing to commit.
    const notifyJobs = (fastPath: boolean) => {
      const log = new RunLog();
      const registry = new JobRegistry();
      registry.register({
        type: 'test.notify',
        ...(fastPath ? { fastPath: true } : {}),
        payload: z.object({ to: z.string() }),
        run: async (ctx) => {
          log.record(ctx.dedupKey);
        },
      });
      return { registry, log };
    };
    const fast = countedWorker(true, notifyJobs(true));
    const leased = countedWorker(false, notifyJobs(false));
    for (const worker of [fast, leased]) {
      for (let i = 0; i < 3; i++) {
        await sendJob(env, { dedupKey: uniqueName('mail'), type: 'test.notify', payload: { to: 'x' } });
      }
      for (const record of await receiveRecords()) {
        expect((await worker.processor.process(record)).action).toBe('completed');
      }
    }
    fast.close();
    leased.close();

    expect(fast.log.total).toBe(3);
    expect(fast.counter.snapshot()).toEqual({ 'DynamoDB.UpdateItem': 3 });
    expect(fast.capacity.snapshot()).toMatchObject({ wru: 3, rru: 0 });
    // Leased: the claim and the completion, each a single-item write of 1 WRU.
    expect(leased.counter.snapshot()).toEqual({ 'DynamoDB.UpdateItem': 6 });
    expect(leased.capacity.snapshot()).toMatchObject({ wru: 6, rru: 0 });
  });

  it('drops a copy of a completed job without running it for one eventually consistent read (0.5 RRU) once a copy was met', async () => {
    const worker = countedWorker(true);
    const account = uniqueName('acct');
    const key = uniqueName('order');
    const copy = { dedupKey: key, type: 'test.credit', payload: { account, amount: 2 } };
    await sendJob(env, copy);
    for (const record of await receiveRecords()) await worker.processor.process(record);
    // The first copy misses the (absent) local cache, runs and is refused at the one write: one copy in
    // the worker's two fast-path messages, past the fortieth where the read pays.
    await sendJob(env, copy);
    for (const record of await receiveRecords()) {
      expect((await worker.processor.process(record)).action).toBe('duplicate');
    }
    const refused = worker.capacity.snapshot();
    expect(worker.log.count(key)).toBe(2);
    // The refused copy: a cancelled two-item transaction, billed 2 WRU per item.
    expect(refused.byCommand.TransactWriteItems?.wru).toBe(4 + 4);

    await sendJob(env, copy);
    const [record] = await receiveRecords();
    if (!record) throw new Error('no message');
    const before = worker.counter.snapshot();
    expect((await worker.processor.process(record)).action).toBe('duplicate');
    worker.close();

    expect(worker.log.count(key)).toBe(2);
    const after = worker.counter.snapshot();
    expect(after['DynamoDB.GetItem']).toBe(1);
    expect(after['DynamoDB.TransactWriteItems']).toBe(before['DynamoDB.TransactWriteItems']);
    const spent = worker.capacity.snapshot();
    expect(spent.wru - refused.wru).toBe(0);
    expect(spent.rru - refused.rru).toBe(0.5);
    expect((await getBalance(env, account))?.balance).toBe(2);
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
