import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  WORKER_LIMIT_ACTIONS,
  WORKER_QUEUE_ACTIONS,
  WORKER_TABLE_ACTIONS,
} from '../../../../infra/constructs/worker-function.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { RESEND_AT_RECEIVES } from '../../../../shared/core/pipeline/limit-bounce.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import {
  type CoreEnv,
  coreEnv,
  leaseStore,
  makeWorker,
  sendJob,
  type Worker,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

// Concurrency limits against the emulator's real SQS and DynamoDB, several workers polling at once. Each
// run records its own start and end (inside `run`, so inside the slot it holds); the overlap of those
// intervals is the concurrency the limit allowed.

let env: CoreEnv;
beforeAll(async () => {
  env = await coreEnv('conc');
});
afterAll(() => env?.close());

interface Run {
  readonly tenant: string;
  readonly dedupKey: string;
  readonly start: number;
  end?: number;
}

/** The most intervals open at one time (an end at t closes before a start at t). */
function maxOverlap(runs: readonly Run[]): number {
  const events = runs.flatMap((r) => [
    { at: r.start, d: 1 },
    { at: r.end ?? Number.POSITIVE_INFINITY, d: -1 },
  ]);
  events.sort((a, b) => a.at - b.at || a.d - b.d);
  let open = 0;
  let max = 0;
  for (const e of events) {
    open += e.d;
    max = Math.max(max, open);
  }
  return max;
}

function tenantJob(type: string, runs: Run[], sleepMs: number, limit: number) {
  return defineJob({
    type,
    payload: z.object({ tenant: z.string() }),
    concurrency: { limit, key: (p: { tenant: string }) => p.tenant },
    async run(ctx, payload) {
      const run: Run = { tenant: payload.tenant, dedupKey: ctx.dedupKey, start: Date.now() };
      runs.push(run);
      await new Promise((done) => setTimeout(done, sleepMs));
      run.end = Date.now();
      return { result: 'ok' };
    },
  });
}

/** Polls with every worker at once until `done()` or `timeoutMs`. */
async function pollUntil(workers: readonly Worker[], done: () => boolean, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  await Promise.all(
    workers.map(async (worker) => {
      while (!done() && Date.now() < until) await worker.poll(1);
    }),
  );
}

describe('concurrency limits (against the emulator)', () => {
  it("keeps a 200-job burst of tenant A to 3 at once while other tenants' jobs flow, each job once with attempts 1", async () => {
    // Arrange: one type limited to 3 per tenant with 200 jobs of A then 10 of C; another type with a high
    // limit per tenant with 30 jobs of B, sent last (behind all of A in the queue); four workers.
    const runs: Run[] = [];
    const limited = uniqueName('t_limited');
    const open = uniqueName('t_open');
    const registry = JobRegistry.of([tenantJob(limited, runs, 150, 3), tenantJob(open, runs, 150, 50)]);
    const workers = Array.from({ length: 4 }, (_, i) => makeWorker(env, registry, { worker: `w${i}` }));
    const keys = (n: number) => Array.from({ length: n }, () => uniqueName('k'));
    const [aKeys, cKeys, bKeys] = [keys(200), keys(10), keys(30)];
    const send = (list: string[], type: string, tenant: string) =>
      Promise.all(list.map((dedupKey) => sendJob(env, { dedupKey, type, payload: { tenant } })));
    await send(aKeys, limited, 'A');
    await send(cKeys, limited, 'C');
    await send(bKeys, open, 'B');
    const total = aKeys.length + bKeys.length + cKeys.length;
    const finished = () => runs.filter((r) => r.end !== undefined).length >= total;

    // Act
    const started = Date.now();
    await pollUntil(workers, finished, 240_000);

    // Assess: no more than 3 of a limited tenant ever ran at once, and the limit was reached (it can fail).
    const of = (tenant: string) => runs.filter((r) => r.tenant === tenant);
    const last = (tenant: string) =>
      Math.max(...of(tenant).map((r) => r.end ?? Number.POSITIVE_INFINITY)) - started;
    const [maxA, maxB, maxC] = ['A', 'B', 'C'].map((t) => maxOverlap(of(t)));
    const bounces = workers.reduce((n, w) => n + w.metrics.get(MetricName.LimitWait), 0);
    console.info(
      `concurrency burst: max A ${maxA}, max C ${maxC}, max B ${maxB}, overall ${maxOverlap(runs)}; A done after ${last('A')} ms, C after ${last('C')} ms, B after ${last('B')} ms; ${bounces} bounces`,
    );
    expect(maxA).toBe(3);
    expect(maxC).toBeLessThanOrEqual(3);
    // A's burst starved no other tenant: B (queued behind all of A) and C (same limit, own key) finished
    // while A was still waiting for its slots.
    expect(last('B')).toBeLessThan(last('A') / 2);
    expect(last('C')).toBeLessThan(last('A'));
    // Exactly once each, and no attempt used by a bounce.
    for (const [tenant, list] of [
      ['A', aKeys],
      ['B', bKeys],
      ['C', cKeys],
    ] as const) {
      expect(of(tenant).length).toBe(list.length);
      expect(new Set(of(tenant).map((r) => r.dedupKey)).size).toBe(list.length);
    }
    const store = workers[0]?.store;
    for (const dedupKey of [...aKeys, ...cKeys]) {
      const item = await store?.get(dedupKey);
      expect(item?.status).toBe(JobStatus.Completed);
      expect(item?.attempts).toBe(1);
    }
    expect(bounces).toBeGreaterThan(0);
  }, 300_000);

  it("frees a dead worker's slot within one slot lease", async () => {
    // Arrange: a limit of 1, whose only slot a worker took and then died holding (its item left as a dead
    // worker leaves it: leased for one lease from the acquire, never renewed nor released).
    const runs: Run[] = [];
    const type = uniqueName('t_dead');
    const registry = JobRegistry.of([tenantJob(type, runs, 10, 1)]);
    const worker = makeWorker(env, registry, { worker: 'survivor' });
    const slotLeaseMs = 3000; // makeWorker's leaseMs: the slot lease is the job lease.
    const died = await leaseStore(env).tryAcquire(
      `slot:${type}:k:T#0`,
      'dead-worker/x/y',
      slotLeaseMs,
      Date.now(),
    );
    expect(died.acquired).toBe(true);
    const diedAt = Date.now();
    await sendJob(env, { dedupKey: uniqueName('waiting'), type, payload: { tenant: 'T' } });

    // Act
    await pollUntil([worker], () => runs.some((r) => r.end !== undefined), 30_000);

    // Assess: it waited (bounced) while the dead worker's lease lasted, and ran within one lease after it
    // plus one bounce's delay (the bounce never waits in the worker).
    const ran = runs[0];
    expect(ran).toBeDefined();
    expect(ran?.start ?? 0).toBeGreaterThanOrEqual(diedAt + slotLeaseMs - 100);
    expect((ran?.start ?? 0) - diedAt).toBeLessThan(slotLeaseMs + 3000);
    expect(worker.metrics.get(MetricName.LimitWait)).toBeGreaterThan(0);
  }, 60_000);

  it('commits nothing when the slot was taken from the run (its fence refuses the commit)', async () => {
    // Arrange: a limited job with an effect; during its run its slot is overwritten as if its lease had
    // ended and another worker took it.
    const type = uniqueName('t_fence');
    const dedupKey = uniqueName('fenced');
    const account = uniqueName('acct');
    let runsSeen = 0;
    const job = defineJob({
      type,
      payload: z.object({ tenant: z.string() }),
      concurrency: { limit: 1, key: (p: { tenant: string }) => p.tenant },
      async run() {
        runsSeen += 1;
        if (runsSeen === 1) {
          await env.clients.doc.send(
            new PutCommand({
              TableName: env.leasesTable,
              Item: {
                leaseKey: `slot:${type}:k:F#0`,
                owner: 'thief',
                token: 9e15,
                leaseUntil: Date.now() + 1000,
              },
            }),
          );
        }
        return {
          effects: [
            { Put: { TableName: env.ledgerTable, Item: { account, balance: runsSeen, version: 1 } } },
          ],
        };
      },
    });
    const worker = makeWorker(env, JobRegistry.of([job]), { worker: 'fenced' });
    await sendJob(env, { dedupKey, type, payload: { tenant: 'F' } });

    // Act: the first run's commit is refused; the retry (after the thief's lease ends) commits.
    for (let turn = 0; runsSeen === 0 && turn < 10; turn++) await worker.poll(1);
    const afterFirst = await env.clients.doc.send(
      new GetCommand({ TableName: env.ledgerTable, Key: { account }, ConsistentRead: true }),
    );

    // Assess: nothing of the first run was written, and the job went back to retry.
    expect(runsSeen).toBe(1);
    expect(afterFirst.Item).toBeUndefined();
    const item = await worker.store.get(dedupKey);
    expect(item?.status).not.toBe(JobStatus.Completed);
    expect(item?.lastErrorClass).toBe('NamedLeaseLostError');
    // The retry, once the thief's lease ended, holds the slot and commits.
    for (let turn = 0; turn < 15 && runsSeen < 2; turn++) await worker.poll(1);
    await worker.poll(1);
    expect((await worker.store.get(dedupKey))?.status).toBe(JobStatus.Completed);
    const final = await env.clients.doc.send(
      new GetCommand({ TableName: env.ledgerTable, Key: { account }, ConsistentRead: true }),
    );
    expect(final.Item?.balance).toBe(2);
  }, 60_000);

  it('costs an uncontended limited job one acquire and one release more than an unlimited one', async () => {
    // Arrange: count the requests each job's record makes (every store shares these clients).
    const calls: string[] = [];
    const count = (name: string) =>
      ((next: (args: unknown) => Promise<unknown>, context: { commandName?: string }) =>
        async (args: unknown) => {
          calls.push(`${name}:${context.commandName}`);
          return next(args);
        }) as never;
    env.clients.doc.middlewareStack.add(count('ddb'), { step: 'initialize', name: 'countDdb' });
    env.clients.sqs.middlewareStack.add(count('sqs'), { step: 'initialize', name: 'countSqs' });
    const runs: Run[] = [];
    const limited = uniqueName('t_cost');
    const registry = JobRegistry.of([
      tenantJob(limited, runs, 0, 3),
      defineJob({
        type: 't_plain',
        payload: z.object({ tenant: z.string() }),
        run: async () => ({ result: 'ok' }),
      }),
    ]);
    const worker = makeWorker(env, registry, { worker: 'cost' });
    const measure = async (type: string) => {
      await sendJob(env, { dedupKey: uniqueName('cost'), type, payload: { tenant: 'Z' } });
      calls.length = 0;
      for (
        let turn = 0;
        turn < 5 &&
        !calls.some((c) => c.endsWith('DeleteMessageBatchCommand') || c.endsWith('DeleteMessageCommand'));
        turn++
      ) {
        await worker.poll(1);
      }
      return calls.filter((c) => !c.endsWith('ReceiveMessageCommand'));
    };
    try {
      // Act
      const plain = await measure('t_plain');
      const withSlot = await measure(limited);
      // Assess: the difference is the slot's acquire and release (two UpdateItems), nothing else.
      console.info(`cost: unlimited ${plain.join(' ')} | limited ${withSlot.join(' ')}`);
      const ddb = (list: string[]) => list.filter((c) => c.startsWith('ddb:')).length;
      expect(ddb(withSlot) - ddb(plain)).toBe(2);
      expect(withSlot.filter((c) => c.startsWith('sqs:')).length).toBe(
        plain.filter((c) => c.startsWith('sqs:')).length,
      );
    } finally {
      env.clients.doc.middlewareStack.remove('countDdb');
      env.clients.sqs.middlewareStack.remove('countSqs');
    }
  }, 60_000);

  it('makes only requests the deployed worker role may make when it bounces (BatchGet of a busy scope, re-send)', async () => {
    // Arrange: both slots of a limit of 2 held elsewhere, and a job message already received
    // RESEND_AT_RECEIVES - 1 times, so this receive's bounce reads the scope and re-sends the message.
    const type = uniqueName('t_iam');
    const registry = JobRegistry.of([tenantJob(type, [], 0, 2)]);
    const worker = makeWorker(env, registry, { worker: 'iam' });
    for (const i of [0, 1]) {
      await leaseStore(env).tryAcquire(`slot:${type}:k:I#${i}`, `other/${i}`, 60_000, Date.now());
    }
    await sendJob(env, { dedupKey: uniqueName('iam'), type, payload: { tenant: 'I' } });
    for (let seen = 0; seen < RESEND_AT_RECEIVES - 1; ) {
      const out = await env.clients.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: env.queueUrl, VisibilityTimeout: 0, WaitTimeSeconds: 1 }),
      );
      seen += out.Messages?.length ?? 0;
    }
    const calls: string[] = [];
    const action = (service: string, command: string) => {
      const name = command.replace(/Command$/, '');
      return `${service}:${/Item$|Message|Queue/.test(name) ? name : `${name}Item`}`;
    };
    const record = (service: 'dynamodb' | 'sqs') =>
      ((
        next: (args: { input: Record<string, unknown> }) => Promise<unknown>,
        context: { commandName?: string },
      ) =>
        async (args: { input: Record<string, unknown> }) => {
          const { TableName, QueueUrl, RequestItems } = args.input;
          const onLeases =
            TableName === env.leasesTable ||
            Object.keys((RequestItems as object | undefined) ?? {}).includes(env.leasesTable);
          if (onLeases || QueueUrl === env.queueUrl) calls.push(action(service, context.commandName ?? ''));
          return next(args);
        }) as never;
    env.clients.doc.middlewareStack.add(record('dynamodb'), { step: 'initialize', name: 'iamDdb' });
    env.clients.sqs.middlewareStack.add(record('sqs'), { step: 'initialize', name: 'iamSqs' });
    try {
      // Act
      await worker.poll(1);
    } finally {
      env.clients.doc.middlewareStack.remove('iamDdb');
      env.clients.sqs.middlewareStack.remove('iamSqs');
    }

    // Assess: the bounce read the scope and re-sent, and the worker role (infra/constructs/worker-function.ts)
    // grants every one of those requests on the leases table and the jobs queue.
    expect(worker.metrics.get(MetricName.LimitWait)).toBe(1);
    expect(calls).toContain('dynamodb:BatchGetItem');
    expect(calls).toContain('sqs:SendMessage');
    const granted = new Set<string>([
      ...WORKER_TABLE_ACTIONS.leases,
      ...WORKER_QUEUE_ACTIONS.jobs,
      ...WORKER_LIMIT_ACTIONS.leases,
      ...WORKER_LIMIT_ACTIONS.jobsQueue,
    ]);
    expect(calls.filter((call) => !granted.has(call))).toEqual([]);
  }, 60_000);
});
