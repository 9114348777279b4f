import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAwsClients, destroyAwsClients } from '../../../../shared/aws/clients.ts';
import { FaultInjector, type FaultRule } from '../../../../shared/aws/fault-injector.ts';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { readDeadLetterAttributes, SqsJobQueue } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { CompletedCache } from '../../../../shared/core/pipeline/completed-cache.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { PermanentJobError } from '../../../../shared/errors.ts';
import { toSqsRecord } from '../../../../shared/runner/sqs-records.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  makeWorker,
  purge,
  putBalance,
  queueCounts,
  quietLogger,
  receiveAll,
  sendJob,
  sendRaw,
  sleep,
} from '../../../support/core-fixture.ts';
import { testAwsConfig, uniqueName } from '../../../support/env.ts';
import { testRegistry } from '../../../support/test-jobs.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('proc');
});
afterAll(() => env?.close());
beforeEach(async () => {
  await purge(env, env.queueUrl);
  await purge(env, env.dlqUrl);
});

/**
 * A processor whose clients fail as `rule` says (`sdkAttempts` 1: no SDK retry; 3: the SDK retries, as
 * it does for lost answers), on the env's queues and tables. Call `close()` when done.
 */
function faultyProcessor(registry: JobRegistry, worker: string, rule: FaultRule, sdkAttempts: number) {
  const faulty = createAwsClients({ ...testAwsConfig(), region: env.region, maxAttempts: sdkAttempts });
  const faults = new FaultInjector().attach(faulty).fail(rule);
  const metrics = new InMemoryMetrics();
  const processor = new JobProcessor({
    store: new DynamoDbJobStore({ client: faulty.doc, tableName: env.jobsTable }),
    queue: new SqsJobQueue({ client: faulty.sqs, queueUrl: env.queueUrl, deadLetterQueueUrl: env.dlqUrl }),
    registry,
    worker,
    logger: quietLogger(),
    metrics,
    backoff: { baseSeconds: 1, capSeconds: 1 },
  });
  return { processor, faults, metrics, close: () => destroyAwsClients(faulty) };
}

/** Polls with the given workers until `done` or the budget runs out. */
async function drain(
  workers: { poll(wait?: number): Promise<number> }[],
  done: () => Promise<boolean>,
  budgetMs = 30_000,
) {
  const end = Date.now() + budgetMs;
  while (Date.now() < end) {
    await Promise.all(workers.map((w) => w.poll(1)));
    if (await done()) return true;
  }
  return done();
}

describe('Class: JobProcessor (against the emulator)', () => {
  it('applies each effect once when the same job is sent many times to competing workers', async () => {
    const { registry, log } = testRegistry(env);
    const workers = [makeWorker(env, registry), makeWorker(env, registry), makeWorker(env, registry)];
    const account = uniqueName('acct');
    const keys = Array.from({ length: 6 }, () => uniqueName('order'));
    for (const key of keys) {
      for (let copy = 0; copy < 3; copy++)
        await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 10 } });
    }
    const ok = await drain(workers, async () => {
      const c = await queueCounts(env);
      return c.visible + c.inFlight === 0;
    });
    expect(ok).toBe(true);
    expect((await getBalance(env, account))?.balance).toBe(60);
    for (const key of keys) expect(log.count(key)).toBeGreaterThanOrEqual(1);
    const skipped = workers.reduce((n, w) => n + w.metrics.get(MetricName.DuplicateSkipped), 0);
    const succeeded = workers.reduce((n, w) => n + w.metrics.get(MetricName.JobSucceeded), 0);
    expect(succeeded).toBe(6);
    expect(skipped).toBe(12);
  });

  it('retries an optimistic conflict in process, then gives the job back with a delay', async () => {
    const account = uniqueName('acct');
    await putBalance(env, account, 0, 1);
    let bumps = 0;
    // Every read is followed by a concurrent writer bumping the version: the commit always conflicts.
    const { registry, log } = testRegistry(env, undefined, {
      beforeCommit: async () => {
        bumps += 1;
        await putBalance(env, account, 0, 1 + bumps);
      },
    });
    const worker = makeWorker(env, registry, {
      optimisticTries: 3,
      conflictBackoff: { baseSeconds: 4, capSeconds: 4 },
      random: () => 0.99,
    });
    const key = uniqueName('order');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 5 } });

    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);

    expect(log.count(key)).toBe(3);
    expect(worker.metrics.get(MetricName.OptimisticConflict)).toBe(3);
    const item = await worker.store.get(key);
    expect(item?.status).toBe(JobStatus.RetryWait);
    expect(item?.lastErrorClass).toBe('OptimisticConflictError');
    // Someone else's write: the attempt is taken back, the conflict counted apart (issue 31 item 9).
    expect(item).toMatchObject({ attempts: 0, conflicts: 1 });
    expect(worker.metrics.get(MetricName.ConflictRetries)).toBe(1);
    expect(worker.metrics.get(MetricName.JobRetried)).toBe(0);
    // Given back with a delay: in flight now, not receivable during the backoff.
    expect(await queueCounts(env)).toMatchObject({ visible: 0, inFlight: 1 });
    expect(await receiveAll(env, env.queueUrl, 1, 1)).toHaveLength(0);
  });

  it('lands the backoff as message visibility, counts only real attempts, and dead-letters at maxAttempts', async () => {
    const { registry, log } = testRegistry(env);
    const worker = makeWorker(env, registry, {
      maxAttempts: 2,
      backoff: { baseSeconds: 3, capSeconds: 3 },
      random: () => 0.99,
    });
    const key = uniqueName('flaky');
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account: 'x', amount: 1, failTimes: 99 },
    });

    // Attempt 1 fails; the message goes back for 3 s.
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);
    expect((await worker.store.get(key))?.attempts).toBe(1);
    const hiddenSince = Date.now();
    expect(await receiveAll(env, env.queueUrl, 1, 0)).toHaveLength(0);
    // A duplicate copy sent now is dropped while the job waits for its retry: not an attempt.
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account: 'x', amount: 1, failTimes: 99 },
    });
    await eventually(
      async () => {
        await worker.poll(1);
        return worker.metrics.get(MetricName.DuplicateSkipped) === 1;
      },
      10_000,
      0,
    );
    expect(worker.metrics.get(MetricName.DuplicateSkipped)).toBe(1);
    expect((await worker.store.get(key))?.attempts).toBe(1);

    // Attempt 2 (the last) fails after the backoff, and the job is dead-lettered.
    const dead = await eventually(
      async () => {
        await worker.poll(1);
        return (await worker.store.get(key))?.status === JobStatus.Dead;
      },
      20_000,
      0,
    );
    expect(dead).toBe(true);
    expect(Date.now() - hiddenSince).toBeGreaterThanOrEqual(2000);
    expect(log.count(key)).toBe(2);
    const item = await worker.store.get(key);
    expect(item).toMatchObject({ status: JobStatus.Dead, attempts: 2, lastErrorClass: 'TransientJobError' });

    const letters = await receiveAll(env, env.dlqUrl, 30, 1);
    expect(letters).toHaveLength(1);
    const reason = readDeadLetterAttributes(letters[0]?.MessageAttributes);
    expect(reason).toMatchObject({
      reason: 'max-attempts',
      errorClass: 'TransientJobError',
      attempts: '2',
      dedupKey: key,
      worker: worker.processor.worker,
    });
    expect(reason.errorMessage).toContain('flaky failure 2');
    expect(await queueCounts(env)).toMatchObject({ visible: 0, inFlight: 0 });
  });

  it('extends the message visibility with every heartbeat, so a job longer than its lease is not redelivered', async () => {
    const { registry, log } = testRegistry(env);
    const worker = makeWorker(env, registry, { leaseMs: 1500 });
    const key = uniqueName('long');
    const account = uniqueName('acct');
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account, amount: 2, sleepMs: 4500 },
    });
    // Received with a 2 s visibility: without the heartbeat's ChangeMessageVisibility it would be back at 2 s.
    const received = await env.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: env.queueUrl,
        VisibilityTimeout: 2,
        WaitTimeSeconds: 2,
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const message = received.Messages?.[0];
    expect(message).toBeDefined();
    if (!message) return;
    const running = worker.processor.process(toSqsRecord(message, env.queueArn, env.region));
    await sleep(3000);
    const during = await receiveAll(env, env.queueUrl, 30, 0);
    const outcome = await running;

    expect(during).toHaveLength(0);
    expect(worker.metrics.get(MetricName.LeaseRenewed)).toBeGreaterThanOrEqual(3);
    expect(outcome).toMatchObject({ action: 'completed' });
    expect(log.count(key)).toBe(1);
    expect((await getBalance(env, account))?.balance).toBe(2);
  });

  it('hides its own message that comes back early, without counting an attempt', async () => {
    const { registry } = testRegistry(env);
    const worker = makeWorker(env, registry);
    const store = worker.store;
    const key = uniqueName('own');
    const messageId = await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account: 'a', amount: 1 },
    });
    // Another worker holds the job for this very message (its visibility lapsed early).
    await store.claim({
      dedupKey: key,
      owner: 'holder',
      messageId,
      type: 'test.credit',
      createdAt: new Date().toISOString(),
      leaseMs: 20_000,
      now: Date.now(),
    });
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);
    expect(worker.metrics.get(MetricName.OwnMessageEarly)).toBe(1);
    expect((await store.get(key))?.attempts).toBe(1);
    expect(await queueCounts(env)).toMatchObject({ visible: 0, inFlight: 1 });
  });

  it('dead-letters each kind of bad envelope with its reason while its batch neighbours succeed', async () => {
    const { registry } = testRegistry(env);
    const worker = makeWorker(env, registry, { maxBodyBytes: 2048 });
    const good = uniqueName('good');
    const account = uniqueName('acct');
    const valid = makeEnvelope({
      id: 'x',
      dedupKey: good,
      type: 'test.credit',
      payload: { account, amount: 7 },
    });
    const bodies = {
      'invalid-not-json': '{not json',
      'invalid-unknown-version': JSON.stringify({ ...valid, v: 9 }),
      'invalid-bad-schema': JSON.stringify({ ...valid, dedupKey: '' }),
      'invalid-unknown-type': JSON.stringify({ ...valid, dedupKey: uniqueName('t'), type: 'no.such.job' }),
      'invalid-too-large': JSON.stringify({
        ...valid,
        dedupKey: uniqueName('big'),
        payload: { pad: 'x'.repeat(4000) },
      }),
    };
    await sendJob(env, { dedupKey: good, type: 'test.credit', payload: { account, amount: 7 } });
    for (const body of Object.values(bodies)) await sendRaw(env, body);
    const badPayload = uniqueName('payload');
    await sendJob(env, { dedupKey: badPayload, type: 'test.credit', payload: { account: 42 } });

    const ok = await drain(
      [worker],
      async () => {
        const c = await queueCounts(env);
        return c.visible + c.inFlight === 0;
      },
      20_000,
    );
    expect(ok).toBe(true);
    expect((await getBalance(env, account))?.balance).toBe(7);
    const letters = await receiveAll(env, env.dlqUrl, 30, 1);
    const reasons = letters.map((m) => readDeadLetterAttributes(m.MessageAttributes).reason).sort();
    // A payload its job type's schema refuses has a reason of its own.
    expect(reasons).toEqual([...Object.keys(bodies), 'invalid-bad-payload'].sort());
    // The original bodies are kept as they were, so nothing is lost.
    expect(letters.map((m) => m.Body)).toContain('{not json');
    // Refused before any claim: no job item, so a corrected resend with the same key runs.
    expect(await worker.store.get(badPayload)).toBeUndefined();
  });

  it('dead-letters a permanent handler error at once (attempt 1)', async () => {
    const { registry, log } = testRegistry(env);
    const worker = makeWorker(env, registry, { maxAttempts: 5 });
    const key = uniqueName('perm');
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account: 'a', amount: 1, permanent: true },
    });
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);
    expect(log.count(key)).toBe(1);
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Dead);
    const letters = await receiveAll(env, env.dlqUrl, 30, 1);
    expect(readDeadLetterAttributes(letters[0]?.MessageAttributes)).toMatchObject({
      reason: 'permanent-error',
      attempts: '1',
    });
  });

  it('never runs a job when the store is unavailable, and gives the message back with a backoff', async () => {
    const { registry, log } = testRegistry(env);
    // A store client pointed at a closed port: every call fails at the network level.
    const dead = createAwsClients({
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      maxAttempts: 1,
      connectTimeoutMs: 500,
    });
    const metrics = new InMemoryMetrics();
    const processor = new JobProcessor({
      store: new DynamoDbJobStore({ client: dead.doc, tableName: env.jobsTable }),
      queue: new SqsJobQueue({
        client: env.clients.sqs,
        queueUrl: env.queueUrl,
        deadLetterQueueUrl: env.dlqUrl,
      }),
      registry,
      worker: 'w-offline',
      logger: quietLogger(),
      metrics,
      backoff: { baseSeconds: 3, capSeconds: 3 },
      random: () => 0.99,
    });
    const key = uniqueName('offline');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account: 'a', amount: 1 } });
    const [message] = await receiveAll(env, env.queueUrl, 30, 2);
    expect(message).toBeDefined();
    if (!message) return;
    const outcome = await processor.process(toSqsRecord(message, env.queueArn, env.region));
    destroyAwsClients(dead);

    expect(outcome).toMatchObject({ action: 'store-unavailable', disposition: 'retain' });
    expect(log.count(key)).toBe(0);
    expect(metrics.get(MetricName.StoreUnavailable)).toBe(1);
    // Back after ~3 s (the backoff), not after the 30 s visibility it was received with.
    expect(await receiveAll(env, env.queueUrl, 30, 1)).toHaveLength(0);
    const back = await eventually(
      async () => (await receiveAll(env, env.queueUrl, 30, 1)).length === 1,
      10_000,
      100,
    );
    expect(back).toBe(true);
  });

  it('gives a job back when its fenced commit hits a store outage, and applies the effect once on the retry', async () => {
    const { registry, log } = testRegistry(env);
    const { processor, faults, metrics, close } = faultyProcessor(
      registry,
      'w-faulty',
      { service: 'DynamoDB', command: 'TransactWriteItems', times: 1 },
      1,
    );
    const key = uniqueName('outage');
    const account = uniqueName('acct');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 4 } });
    const settled = await eventually(
      async () => {
        const [message] = await receiveAll(env, env.queueUrl, 30, 1);
        if (message) {
          const outcome = await processor.process(toSqsRecord(message, env.queueArn, env.region));
          if (outcome.disposition === 'delete')
            await env.clients.sqs.send(
              new DeleteMessageCommand({ QueueUrl: env.queueUrl, ReceiptHandle: message.ReceiptHandle }),
            );
        }
        return (await getBalance(env, account))?.balance !== undefined;
      },
      20_000,
      0,
    );
    close();

    expect(settled).toBe(true);
    expect(faults.injected.get('DynamoDB.TransactWriteItems')).toBe(1);
    expect(metrics.get(MetricName.StoreUnavailable)).toBe(1);
    expect(metrics.get(MetricName.JobRetried)).toBe(1);
    expect(log.count(key)).toBe(2);
    expect((await getBalance(env, account))?.balance).toBe(4);
    // The outage was not the job's failure: its attempt was refunded.
    expect(await makeWorker(env, registry).store.get(key)).toMatchObject({
      status: JobStatus.Completed,
      attempts: 1,
    });
  });

  it('treats a commit whose answer was lost as done: the effect is applied once and the job is not re-run', async () => {
    const { registry, log } = testRegistry(env);
    const { processor, faults, close } = faultyProcessor(
      registry,
      'w-lost-answer',
      { service: 'DynamoDB', command: 'TransactWriteItems', times: 1, when: 'after' },
      1,
    );
    const key = uniqueName('lost');
    const account = uniqueName('acct');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 6 } });
    const [message] = await receiveAll(env, env.queueUrl, 30, 2);
    expect(message).toBeDefined();
    if (!message) return;

    const outcome = await processor.process(toSqsRecord(message, env.queueArn, env.region));
    close();

    expect(faults.injected.get('DynamoDB.TransactWriteItems')).toBe(1);
    expect(outcome).toMatchObject({ action: 'completed', disposition: 'delete' });
    expect(log.count(key)).toBe(1);
    expect((await getBalance(env, account))?.balance).toBe(6);
    expect(await makeWorker(env, registry).store.get(key)).toMatchObject({
      status: JobStatus.Completed,
      attempts: 1,
    });
  });

  it('recognises its own claim when the answer was lost and the SDK retried it: the job runs at once', async () => {
    // Prepare: the first UpdateItem (the claim) is applied but its answer lost; the SDK retries it, and
    // the retry is refused by that very claim.
    const { registry, log } = testRegistry(env);
    const { processor, faults, metrics, close } = faultyProcessor(
      registry,
      'w-lost-claim',
      { service: 'DynamoDB', command: 'UpdateItem', times: 1, when: 'after' },
      3,
    );
    const key = uniqueName('lostclaim');
    const account = uniqueName('acct');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 9 } });
    const [message] = await receiveAll(env, env.queueUrl, 30, 2);
    if (!message) throw new Error('no message');

    // Act
    const outcome = await processor.process(toSqsRecord(message, env.queueArn, env.region));
    close();

    // Assess: ours, so it ran now (not hidden as "our own message back early", not taken over later).
    expect(faults.injected.get('DynamoDB.UpdateItem')).toBe(1);
    expect(outcome).toMatchObject({ action: 'completed', disposition: 'delete' });
    expect(metrics.get(MetricName.OwnMessageEarly)).toBe(0);
    expect(log.count(key)).toBe(1);
    expect((await getBalance(env, account))?.balance).toBe(9);
    expect(await makeWorker(env, registry).store.get(key)).toMatchObject({
      status: JobStatus.Completed,
      attempts: 1,
    });
  });

  it('recognises its own release when the answer was lost and the SDK retried it: a retry, not a lost lease', async () => {
    // Prepare: a job that fails once; the release after that failure (the second UpdateItem, after the
    // claim) is applied but its answer lost, and the SDK's retry is refused by that very release.
    const { registry } = testRegistry(env);
    const { processor, faults, metrics, close } = faultyProcessor(
      registry,
      'w-lost-release',
      { service: 'DynamoDB', command: 'UpdateItem', skip: 1, times: 1, when: 'after' },
      3,
    );
    const key = uniqueName('lostrel');
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account: uniqueName('acct'), amount: 2, failTimes: 1 },
    });
    const [message] = await receiveAll(env, env.queueUrl, 30, 2);
    if (!message) throw new Error('no message');

    // Act
    const outcome = await processor.process(toSqsRecord(message, env.queueArn, env.region));
    close();

    // Assess: an ordinary retry with its backoff, not "lease lost".
    expect(faults.injected.get('DynamoDB.UpdateItem')).toBe(1);
    expect(outcome).toMatchObject({ action: 'retry', disposition: 'retain' });
    expect(metrics.get(MetricName.LeaseLost)).toBe(0);
    expect(await makeWorker(env, registry).store.get(key)).toMatchObject({
      status: JobStatus.RetryWait,
      attempts: 1,
      lastErrorClass: 'TransientJobError',
    });
  });

  it('keeps the message when marking the job DEAD fails after its letter went out, so it is never stranded', async () => {
    // Prepare: a poison job; the UpdateItem that marks it DEAD fails (after the claim and the fenced
    // renewal that precedes every letter).
    const { registry } = testRegistry(env);
    const { processor, faults, close } = faultyProcessor(
      registry,
      'w-mark-dead',
      { service: 'DynamoDB', command: 'UpdateItem', skip: 2, times: 1 },
      1,
    );
    const key = uniqueName('markdead');
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account: uniqueName('acct'), amount: 1, permanent: true },
    });
    const [message] = await receiveAll(env, env.queueUrl, 30, 2);
    if (!message) throw new Error('no message');

    // Act
    const outcome = await processor.process(toSqsRecord(message, env.queueArn, env.region));
    close();

    // Assess: the letter is out, the item is not DEAD, and the original stays to bring the job back.
    expect(faults.injected.get('DynamoDB.UpdateItem')).toBe(1);
    expect(outcome).toMatchObject({ disposition: 'retain' });
    expect((await makeWorker(env, registry).store.get(key))?.status).not.toBe(JobStatus.Dead);
    const counts = await queueCounts(env);
    expect(counts.visible + counts.inFlight + counts.delayed).toBe(1);
    const letters = await receiveAll(env, env.dlqUrl, 30, 2);
    expect(letters.some((m) => m.Body?.includes(key))).toBe(true);
  });

  it('sends no letter when its lease was taken before dead-lettering (a zombie cannot strand a stale letter)', async () => {
    // Prepare: a job whose run ends in a permanent error, but only after another worker took the job
    // over (token bumped, another owner), as after a stall past the lease.
    const registry = new JobRegistry().register({
      type: 'test.zombie',
      payload: z.object({}),
      run: async (ctx) => {
        await env.clients.doc.send(
          new UpdateCommand({
            TableName: env.jobsTable,
            Key: { dedupKey: ctx.dedupKey },
            UpdateExpression: 'SET #o = :other, #t = #t + :one',
            ExpressionAttributeNames: { '#o': 'owner', '#t': 'token' },
            ExpressionAttributeValues: { ':other': 'w-new-owner', ':one': 1 },
          }),
        );
        throw new PermanentJobError('fails, but too late to say so');
      },
    });
    const worker = makeWorker(env, registry, { worker: 'w-zombie' });
    const key = uniqueName('zombie');
    await sendJob(env, { dedupKey: key, type: 'test.zombie', payload: {} });
    const [message] = await receiveAll(env, env.queueUrl, 30, 2);
    if (!message) throw new Error('no message');

    // Act
    const outcome = await worker.processor.process(toSqsRecord(message, env.queueArn, env.region));

    // Assess: no letter, the message left for the new owner, the item untouched by the zombie.
    expect(outcome).toMatchObject({ action: 'lease-lost', disposition: 'retain' });
    expect((await receiveAll(env, env.dlqUrl, 30, 1)).filter((m) => m.Body?.includes(key))).toEqual([]);
    expect(await worker.store.get(key)).toMatchObject({ owner: 'w-new-owner', status: JobStatus.InProgress });
  });

  it('deletes a racing copy at once, before any batch delete: only the owner stays in flight', async () => {
    // Prepare: two copies of one slow job, received together; a first worker runs one.
    const { registry, log } = testRegistry(env);
    const owner = makeWorker(env, registry);
    const other = makeWorker(env, registry);
    const key = uniqueName('racing');
    const account = uniqueName('acct');
    for (let copy = 0; copy < 2; copy++) {
      await sendJob(env, {
        dedupKey: key,
        type: 'test.credit',
        payload: { account, amount: 2, sleepMs: 2000 },
      });
    }
    const [first, second] = (await receiveAll(env, env.queueUrl, 30)).map((m) =>
      toSqsRecord(m, env.queueArn, env.region),
    );
    if (!first || !second) throw new Error('expected both copies');
    const running = owner.processor.process(first);
    await eventually(async () => (await owner.store.get(key)) !== undefined, 5000, 50);

    // Act: the second copy meets the live lease. Nobody deletes records here but the processor itself.
    const copy = await other.processor.process(second);

    // Assess
    expect(copy).toMatchObject({ action: 'duplicate', disposition: 'delete' });
    expect(await queueCounts(env)).toMatchObject({ visible: 0, inFlight: 1 });
    expect((await running).action).toBe('completed');
    expect(log.count(key)).toBe(1);
    expect((await getBalance(env, account))?.balance).toBe(2);
  });

  it('skips the claim write on a local-cache hit for a repeated duplicate', async () => {
    const { registry, log } = testRegistry(env);
    const cache = new CompletedCache();
    const worker = makeWorker(env, registry, { cache });
    const key = uniqueName('cached');
    const account = uniqueName('acct');
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 3 } });
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);
    expect(cache.has(key)).toBe(true);
    await sendJob(env, { dedupKey: key, type: 'test.credit', payload: { account, amount: 3 } });
    await eventually(async () => (await worker.poll(1)) > 0, 10_000, 0);
    expect(worker.metrics.get(MetricName.CacheHit)).toBe(1);
    expect(log.count(key)).toBe(1);
    expect((await getBalance(env, account))?.balance).toBe(3);
  });
});
