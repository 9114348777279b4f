import { ChangeMessageVisibilityCommand, type Message } from '@aws-sdk/client-sqs';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { changeBalance, ledgerTable } from '../../../examples/ledger/ledger.ts';
import { DEFAULTS } from '../../../shared/core/contract/defaults.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import type { JobSource } from '../../../shared/core/model/registry.ts';
import { ConfigError } from '../../../shared/errors.ts';
import { defineJob, defineJobs } from '../../../shared/jobs/define-job.ts';
import { toSqsRecord } from '../../../shared/runner/sqs-records.ts';
import { type WorkerEnvInput, workerConfigFromEnv, workerEnv } from '../../../shared/worker/config.ts';
import { createWorkerHandler } from '../../../shared/worker/handler.ts';
import {
  type CoreEnv,
  coreEnv,
  getBalance,
  leaseStore,
  makeWorker,
  queueCounts,
  quietLogger,
  receiveAll,
  sendJob,
} from '../../support/core-fixture.ts';
import { testEndpoint, uniqueName } from '../../support/env.ts';

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('handler');
});
afterAll(() => env?.close());

/** The worker handler on this file's queues and tables (the ledger table named), with `settings`. */
function handlerOnEnv(jobs: JobSource, settings: Partial<WorkerEnvInput> = {}, worker?: string) {
  return createWorkerHandler({
    jobs,
    config: workerConfigFromEnv(
      workerEnv({
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
        ...settings,
      }),
    ),
    clients: env.clients,
    tableNames: { ledger: env.ledgerTable },
    ...(worker ? { worker } : {}),
    logger: quietLogger(),
  });
}

/** This test's own message (an earlier test may leave one of its own visible in the shared queue). */
async function receiveOwn(dedupKey: string): Promise<Message> {
  for (let round = 0; round < 5; round++) {
    const found = (await receiveAll(env, env.queueUrl, 30, 2)).find((m) => m.Body?.includes(dedupKey));
    if (found) return found;
  }
  throw new Error(`message of ${dedupKey} not received`);
}

describe('Function: createWorkerHandler', () => {
  it('never lets a lease outlive the invocation deadline: a job still running then is given back', async () => {
    // Prepare: a 30 s lease, but an invocation with 2.5 s left and a 0.5 s margin.
    const config = workerConfigFromEnv(
      workerEnv({
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
        tables: { ledger: env.ledgerTable },
        leaseMs: 30_000,
        deadlineMarginMs: 500,
        testHooks: true,
      }),
    );
    const handler = createWorkerHandler({
      clients: env.clients,
      config,
      jobs: ledgerJobs,
      tableNames: { ledger: env.ledgerTable },
      worker: 'w-deadline',
      logger: quietLogger(),
    });
    const key = uniqueName('deadline');
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account: uniqueName('a'), amount: 1, simulate: { sleepMs: 8000 } },
    });
    const [message] = await receiveAll(env, env.queueUrl, 30, 2);
    expect(message).toBeDefined();
    if (!message) return;

    // Act: watch the job item while the invocation runs.
    const invokedAt = Date.now();
    const store = makeWorker(env, ledgerJobs).store;
    let running = true;
    const leaseEnds: number[] = [];
    const watcher = (async () => {
      while (running) {
        const item = await store.get(key);
        if (item?.status === JobStatus.InProgress) leaseEnds.push(item.leaseUntil);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const response = await handler(
      { Records: [toSqsRecord(message, env.queueArn, env.region)] },
      { getRemainingTimeInMillis: () => Math.max(0, invokedAt + 2500 - Date.now()) },
    );
    const returnedAt = Date.now();
    running = false;
    await watcher;

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: message.MessageId }]);
    expect(returnedAt - invokedAt).toBeLessThan(8000);
    const item = await makeWorker(env, ledgerJobs).store.get(key);
    expect(item?.status).toBe(JobStatus.RetryWait);
    expect(item?.lastErrorClass).toBe('DeadlineError');
    // While it ran, its lease never reached past the deadline (remaining time less the margin), not
    // the 30 s lease it would have taken without one.
    expect(leaseEnds.length).toBeGreaterThan(0);
    expect(Math.max(...leaseEnds)).toBeLessThanOrEqual(invokedAt + 2000);
    // Given back at once (visibility 0), not after the 30 s it was received with.
    expect(await queueCounts(env)).toMatchObject({ visible: 1 });
  });

  it('starts without any application table setting when its jobs declare none, and runs them', async () => {
    // Prepare: a job module with one job and no tables; the environment names only leaseq's own resources.
    const ran: string[] = [];
    const ping = defineJob({
      type: 'test.ping',
      payload: z.object({ n: z.number() }),
      async run(ctx, p) {
        ran.push(`${ctx.dedupKey}:${p.n}`);
        return { result: { pong: p.n } };
      },
    });
    const environment = {
      ...workerEnv({
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
      }),
      AWS_ENDPOINT_URL: testEndpoint(),
    };
    const handler = createWorkerHandler({
      jobs: defineJobs([ping]),
      env: environment,
      logger: quietLogger(),
    });
    const key = uniqueName('ping');
    await sendJob(env, { dedupKey: key, type: 'test.ping', payload: { n: 3 } });
    const message = await receiveOwn(key);

    // Act
    const response = await handler(
      { Records: [toSqsRecord(message, env.queueArn, env.region)] },
      { getRemainingTimeInMillis: () => 30_000 },
    );

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(ran).toEqual([`${key}:3`]);
    const item = await makeWorker(env, ledgerJobs).store.get(key);
    expect(item).toMatchObject({ status: JobStatus.Completed, result: { pong: 3 } });
  });

  it('refuses to start when a table its jobs declare has no name, naming the variable', () => {
    const environment = workerEnv({ queueUrl: 'q', dlqUrl: 'd', jobsTable: 'j', leasesTable: 'l' });
    expect(() => createWorkerHandler({ jobs: ledgerJobs, env: environment, clients: env.clients })).toThrow(
      'invalid worker configuration: LEASEQ_TABLE_LEDGER is required (the physical name of a table the jobs declare)',
    );
  });

  it('refuses to start when tableNames given in code lack a table its jobs declare', () => {
    const config = workerConfigFromEnv(
      workerEnv({ queueUrl: 'q', dlqUrl: 'd', jobsTable: 'j', leasesTable: 'l' }),
    );
    expect(() =>
      createWorkerHandler({ jobs: ledgerJobs, config, clients: env.clients, tableNames: {} }),
    ).toThrow('invalid worker configuration: no physical name for table ledger (tableNames)');
  });

  it('dead-letters a payload carrying test hooks unless the deployment opted in', async () => {
    // Prepare: the ledger jobs with test hooks off (the deployed default).
    const config = workerConfigFromEnv(
      workerEnv({
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
      }),
    );
    expect(config.testHooks).toBe(false);
    const handler = handlerOnEnv(ledgerJobs);
    const key = uniqueName('hook');
    const account = uniqueName('a');
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account, amount: 5, simulate: { sleepMs: 60_000 } },
    });
    const message = await receiveOwn(key);

    // Act
    const started = Date.now();
    const response = await handler(
      { Records: [toSqsRecord(message, env.queueArn, env.region)] },
      { getRemainingTimeInMillis: () => 30_000 },
    );

    // Assess: not slept, not applied, dead-lettered at once with the reason.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(response.batchItemFailures).toEqual([]);
    const item = await makeWorker(env, ledgerJobs).store.get(key);
    expect(item?.status).toBe(JobStatus.Dead);
    expect(item?.lastError).toMatch(
      /payload.simulate is a test hook and this deployment does not run test hooks/,
    );
    expect(await getBalance(env, account)).toBeUndefined();
    const letters = await receiveAll(env, env.dlqUrl, 30, 2);
    expect(letters.some((m) => m.Body?.includes(key))).toBe(true);
  });

  it('gives a job ctx.withLease on the leases table: held under the job while it runs, released after', async () => {
    // Prepare: a job that takes a named lease and looks at it from inside.
    const leases = leaseStore(env);
    const resource = uniqueName('acct');
    const seen: { owner?: string; token?: number; handleToken?: number }[] = [];
    const locked = defineJob({
      type: 'test.locked',
      payload: z.object({ resource: z.string() }),
      async run(ctx, p) {
        await ctx.withLease(p.resource, async (handle) => {
          const item = await leases.get(p.resource);
          seen.push({ owner: item?.owner, token: item?.token, handleToken: handle.token });
        });
        return { result: { locked: p.resource } };
      },
    });
    const handler = handlerOnEnv([locked], {}, 'w-lock');
    const key = uniqueName('locked');
    await sendJob(env, { dedupKey: key, type: 'test.locked', payload: { resource } });
    const message = await receiveOwn(key);

    // Act
    const response = await handler(
      { Records: [toSqsRecord(message, env.queueArn, env.region)] },
      { getRemainingTimeInMillis: () => 30_000 },
    );

    // Assess: held by this worker and job, with the token the job got; free again afterwards.
    expect(response.batchItemFailures).toEqual([]);
    expect(seen).toEqual([
      { owner: `w-lock/${key}`, token: seen[0]?.handleToken, handleToken: expect.any(Number) },
    ]);
    expect((await leases.get(resource))?.owner).toBeUndefined();
    expect((await leases.tryAcquire(resource, 'someone-else', 1000, Date.now())).acquired).toBe(true);
  });

  it('fences the commit with the named lease: a job whose lease was taken commits nothing, then retries once', async () => {
    // Prepare: a job that takes a named lease and credits an account; on its first attempt the lease is
    // taken from it (token bumped, another owner) before it commits, as a takeover after a stall would.
    const resource = uniqueName('acct-lock');
    const account = uniqueName('acct');
    const guarded = defineJob({
      type: 'test.guarded',
      payload: z.object({ account: z.string(), resource: z.string() }),
      tables: { ledger: ledgerTable },
      async run(ctx, p) {
        await ctx.withLease(p.resource, async () => {
          if (ctx.attempt === 1) {
            await env.clients.doc.send(
              new UpdateCommand({
                TableName: env.leasesTable,
                Key: { leaseKey: p.resource },
                UpdateExpression: 'SET #o = :thief, #t = #t + :one',
                ExpressionAttributeNames: { '#o': 'owner', '#t': 'token' },
                ExpressionAttributeValues: { ':thief': 'someone-else', ':one': 1 },
              }),
            );
          }
        });
        return { effects: [await changeBalance(ctx.tables.ledger, p.account, 5)] };
      },
    });
    const handler = handlerOnEnv([guarded], { backoffBaseSeconds: 1, backoffCapSeconds: 1 });
    const key = uniqueName('guarded');
    await sendJob(env, { dedupKey: key, type: 'test.guarded', payload: { account, resource } });
    const invoke = async () =>
      handler(
        { Records: [toSqsRecord(await receiveOwn(key), env.queueArn, env.region)] },
        { getRemainingTimeInMillis: () => 30_000 },
      );

    // Act 1: the stale holder's commit
    const first = await invoke();

    // Assess 1: nothing applied; the job is waiting for a retry with the reason.
    expect(first.batchItemFailures).toHaveLength(1);
    expect(await getBalance(env, account)).toBeUndefined();
    const store = makeWorker(env, ledgerJobs).store;
    expect(await store.get(key)).toMatchObject({
      status: JobStatus.RetryWait,
      lastErrorClass: 'NamedLeaseLostError',
    });

    // Act 2: the other holder lets go; the retry holds the lease and commits.
    await env.clients.doc.send(
      new UpdateCommand({
        TableName: env.leasesTable,
        Key: { leaseKey: resource },
        UpdateExpression: 'SET #u = :zero REMOVE #o',
        ExpressionAttributeNames: { '#u': 'leaseUntil', '#o': 'owner' },
        ExpressionAttributeValues: { ':zero': 0 },
      }),
    );
    const second = await invoke();

    // Assess 2: applied once, and the lease was released after the commit.
    expect(second.batchItemFailures).toEqual([]);
    expect((await getBalance(env, account))?.balance).toBe(5);
    expect(await store.get(key)).toMatchObject({ status: JobStatus.Completed, attempts: 2 });
    expect((await leaseStore(env).get(resource))?.owner).toBeUndefined();
  });

  it('keeps a healthy owner running when its message is received again (a stale receipt is not a lost lease)', async () => {
    // Prepare: a 4 s job under a 1.5 s lease (beats every 0.5 s).
    const handler = handlerOnEnv(ledgerJobs, { leaseMs: 1500, testHooks: true });
    const key = uniqueName('early');
    const account = uniqueName('a');
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account, amount: 3, simulate: { sleepMs: 4000 } },
    });
    const message = await receiveOwn(key);

    // Act: while the owner works, its message becomes visible and is received again, which makes the
    // owner's receipt handle stale (the next visibility extensions with it fail).
    const running = handler(
      { Records: [toSqsRecord(message, env.queueArn, env.region)] },
      { getRemainingTimeInMillis: () => 30_000 },
    );
    await new Promise((r) => setTimeout(r, 800));
    await env.clients.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: env.queueUrl,
        ReceiptHandle: message.ReceiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    const again = await receiveOwn(key);
    expect(again.ReceiptHandle).not.toBe(message.ReceiptHandle);
    const response = await running;

    // Assess: the owner finished its job on its first attempt; the effect applied once.
    expect(response.batchItemFailures).toEqual([]);
    expect(await makeWorker(env, ledgerJobs).store.get(key)).toMatchObject({
      status: JobStatus.Completed,
      attempts: 1,
    });
    expect((await getBalance(env, account))?.balance).toBe(3);
  });

  it('rejects a worker environment that lacks names, listing each', () => {
    expect(() => workerConfigFromEnv({})).toThrow(
      /LEASEQ_JOBS_QUEUE_URL is required.*LEASEQ_DLQ_URL is required.*LEASEQ_JOBS_TABLE is required.*LEASEQ_LEASES_TABLE is required/,
    );
    expect(() =>
      workerConfigFromEnv({
        ...workerEnv({ queueUrl: 'q', dlqUrl: 'd', jobsTable: 'j', leasesTable: 'l' }),
        LEASEQ_LEASE_MS: '-5',
      }),
    ).toThrow(/LEASEQ_LEASE_MS must be at least 1000 \(ms\), received -5/);
  });

  // Defect 5 (issue 18): LEASEQ_LEASE_MS=500 passed the config, and the handler then handed every record
  // back as "too close to the deadline" (45 hand-backs in 15 invocations, 0 of 3 jobs run). It must fail
  // at cold start, in one line that names the minimum.
  it('refuses a lease below the minimum at cold start with one line naming it, before any record', () => {
    const env = {
      ...workerEnv({ queueUrl: 'q', dlqUrl: 'd', jobsTable: 'j', leasesTable: 'l' }),
      LEASEQ_LEASE_MS: '500',
    };
    const cold = () => createWorkerHandler({ jobs: ledgerJobs, env });
    expect(cold).toThrow(ConfigError);
    expect(cold).toThrow(
      /^invalid worker configuration: LEASEQ_LEASE_MS must be at least 1000 \(ms\), received 500$/,
    );
    expect(() => workerConfigFromEnv({ ...env, LEASEQ_LEASE_MS: String(DEFAULTS.minLeaseMs) })).not.toThrow();
  });

  it('runs a job under the shortest lease it accepts (DEFAULTS.minLeaseMs) in a Lambda invocation, with no hand-back', async () => {
    // Prepare: a 1.5 s job, so the 1 s lease must be renewed to finish.
    const handler = handlerOnEnv(ledgerJobs, { leaseMs: DEFAULTS.minLeaseMs, testHooks: true });
    const key = uniqueName('minlease');
    const account = uniqueName('a');
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account, amount: 2, simulate: { sleepMs: 1500 } },
    });
    const message = await receiveOwn(key);

    // Act
    const response = await handler(
      { Records: [toSqsRecord(message, env.queueArn, env.region)] },
      { getRemainingTimeInMillis: () => 30_000 },
    );

    // Assess: run and committed on its first attempt.
    expect(response.batchItemFailures).toEqual([]);
    expect(await makeWorker(env, ledgerJobs).store.get(key)).toMatchObject({
      status: JobStatus.Completed,
      attempts: 1,
    });
    expect((await getBalance(env, account))?.balance).toBe(2);
  });
});
