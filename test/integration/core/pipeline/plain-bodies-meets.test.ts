import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { RESEND_AT_RECEIVES } from '../../../../shared/core/pipeline/limit-bounce.ts';
import { LIFE_ATTRIBUTE, ORIGIN_ATTRIBUTE } from '../../../../shared/core/pipeline/record-message.ts';
import { PermanentJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { cancelJob } from '../../../../shared/ops/cancel.ts';
import { redrive } from '../../../../shared/ops/dlq-redrive.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  leaseStore,
  makeWorker,
  queueCounts,
  receiveAll,
  sendRaw,
  type Worker,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

// Where plain bodies meet the rest of the protocol (docs/envelope.md, "Plain bodies"): a limit's re-send
// (the body goes out again as it came, with leaseq-origin), cancel by key, the fast path, and FIFO groups.
//
// Each case has its own queues and tables: a plain body's type is fixed by the job set, so a worker reads
// any message on its queue as its own job; a message an earlier case left behind (one that failed half-way)
// would run under the next case's type, and its held slot would keep the next case's drain waiting.

let env: CoreEnv;
const opened: CoreEnv[] = [];
/** A fresh stack's queues and tables for this case, closed after it. */
async function freshEnv(...args: Parameters<typeof coreEnv>): Promise<CoreEnv> {
  const e = await coreEnv(...args);
  opened.push(e);
  return e;
}
beforeEach(async () => {
  env = await freshEnv('plainmeet');
});
afterEach(() => {
  for (const e of opened.splice(0)) e.close();
});

/** A job of `type` reading `{ ticket: { id, tenant } }` bodies; `runs` gets each run's key. */
function ticketJob(
  type: string,
  runs: string[],
  extra: { fastPath?: boolean; limit?: number; deadKeyTtl?: number; broken?: () => boolean } = {},
) {
  const job = defineJob({
    type,
    payload: z.object({ id: z.string(), tenant: z.string() }),
    ...(extra.fastPath ? { fastPath: true } : {}),
    ...(extra.deadKeyTtl ? { deadKeyTtl: extra.deadKeyTtl } : {}),
    ...(extra.limit ? { concurrency: { limit: extra.limit, key: (p: { tenant: string }) => p.tenant } } : {}),
    async run(ctx) {
      runs.push(ctx.dedupKey);
      if (extra.broken?.()) throw new PermanentJobError('the downstream is broken');
      return { result: 'ok' };
    },
  });
  return JobRegistry.of([job], { plainBodies: { type, key: 'ticket.id', payload: 'ticket' } });
}

const ticket = (id: string, tenant = 'T') => JSON.stringify({ ticket: { id, tenant } });

async function drain(e: CoreEnv, worker: Worker, timeoutMs = 30_000): Promise<boolean> {
  return eventually(
    async () => {
      await worker.poll(1);
      const c = await queueCounts(e);
      return c.visible + c.inFlight + c.delayed === 0;
    },
    timeoutMs,
    0,
  );
}

describe('Plain bodies where they meet the protocol (emulator)', () => {
  it("a limit's re-send sends the plain body as it came, with its origin, and the job runs once under its key", async () => {
    // Prepare: the tenant's one slot held elsewhere, and the message received RESEND_AT_RECEIVES - 1
    // times, so this receive's bounce re-sends it.
    const type = uniqueName('t_plain');
    const runs: string[] = [];
    const worker = makeWorker(env, ticketJob(type, runs, { limit: 1 }));
    const slot = `slot:${type}:k:R#0`;
    const held = await leaseStore(env).tryAcquire(slot, 'other/0', 60_000, Date.now());
    if (!held.acquired) throw new Error('the slot is not free');
    const key = uniqueName('tk');
    const body = ticket(key, 'R');
    const origin = await sendRaw(env, body);
    for (let seen = 0; seen < RESEND_AT_RECEIVES - 1; ) {
      const out = await env.clients.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: env.queueUrl, VisibilityTimeout: 0, WaitTimeSeconds: 1 }),
      );
      seen += out.Messages?.length ?? 0;
    }

    // Act: the bounce re-sends it (its SendMessage is recorded), then the slot frees and it runs.
    const sends: { MessageBody?: string; MessageAttributes?: Record<string, { StringValue?: string }> }[] =
      [];
    env.clients.sqs.middlewareStack.add(
      ((next: (args: { input: object }) => Promise<unknown>, context: { commandName?: string }) =>
        async (args: { input: object }) => {
          if (context.commandName === 'SendMessageCommand') sends.push(args.input);
          return next(args);
        }) as never,
      { step: 'initialize', name: 'plainResend' },
    );
    try {
      // Until the worker has received it: a receive may come back empty (SQS promises no message per call).
      const bounced = await eventually(async () => {
        await worker.poll(1);
        return worker.metrics.get(MetricName.LimitWait) > 0;
      });
      expect(bounced).toBe(true);
    } finally {
      env.clients.sqs.middlewareStack.remove('plainResend');
    }
    expect(worker.metrics.get(MetricName.LimitWait)).toBe(1);
    await leaseStore(env).release(held.lease);
    expect(await drain(env, worker, 60_000)).toBe(true);

    // Assess: the producer's body went out unchanged, carrying its origin; the job ran once and completed.
    expect(sends.map((send) => send.MessageBody)).toEqual([body]);
    expect(sends[0]?.MessageAttributes?.[ORIGIN_ATTRIBUTE]?.StringValue).toBe(origin);
    expect(runs).toEqual([key]);
    const item = await worker.store.get(key);
    expect(item).toMatchObject({ status: JobStatus.Completed, attempts: 1 });
  }, 90_000);

  it('a cancel by key before the plain message comes leaves a tombstone that drops it', async () => {
    const type = uniqueName('t_cancel');
    const runs: string[] = [];
    const worker = makeWorker(env, ticketJob(type, runs));
    const key = uniqueName('tk');
    const target = {
      clients: env.clients,
      names: {
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
      },
    };
    expect(await cancelJob(target, key, { by: 'ops@test' })).toEqual({ outcome: 'tombstone' });
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Cancelled);

    await sendRaw(env, ticket(key));
    expect(await drain(env, worker)).toBe(true);

    expect(runs).toEqual([]);
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Cancelled);
  }, 60_000);

  it('the fast path runs a plain body once and drops its copy', async () => {
    const type = uniqueName('t_fast');
    const runs: string[] = [];
    const worker = makeWorker(env, ticketJob(type, runs, { fastPath: true }));
    const key = uniqueName('tk');
    await sendRaw(env, ticket(key));
    await sendRaw(env, ticket(key));

    expect(await drain(env, worker)).toBe(true);

    expect((await worker.store.get(key))?.status).toBe(JobStatus.Completed);
    expect(worker.metrics.get(MetricName.JobSucceeded)).toBe(1);
    expect(runs.filter((k) => k === key).length).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it("a redrive sends the producer's body back as it was, and it runs under the same key", async () => {
    // Prepare: the job dies for good while its downstream is broken.
    const type = uniqueName('t_redrive');
    const runs: string[] = [];
    let broken = true;
    const worker = makeWorker(env, ticketJob(type, runs, { broken: () => broken }));
    const key = uniqueName('tk');
    await sendRaw(env, ticket(key));
    expect(await drain(env, worker)).toBe(true);
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Dead);

    // Act: the downstream is fixed; the operator redrives by key, the letter's body unchanged.
    broken = false;
    const target = {
      clients: env.clients,
      names: {
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
      },
    };
    expect(await redrive(target, { filter: { dedupKey: key }, by: 'ops@test' })).toMatchObject({
      redriven: 1,
    });
    expect(await drain(env, worker)).toBe(true);

    // Assess
    expect(runs).toEqual([key, key]);
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Completed);
  }, 60_000);

  it("a redriven plain job's limit re-send keeps the producer's body, the redrive's life and its origin", async () => {
    // Prepare: a plain job dies, is redriven by key (its message carries the reset item's life), and
    // meets its tenant's one slot held elsewhere often enough for the bounce to re-send it.
    const type = uniqueName('t_relife');
    const runs: string[] = [];
    let broken = true;
    const worker = makeWorker(env, ticketJob(type, runs, { limit: 1, broken: () => broken }));
    const key = uniqueName('tk');
    const body = ticket(key, 'L');
    await sendRaw(env, body);
    expect(await drain(env, worker)).toBe(true);
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Dead);
    broken = false;
    const sends: { MessageBody?: string; MessageAttributes?: Record<string, { StringValue?: string }> }[] =
      [];
    env.clients.sqs.middlewareStack.add(
      ((next: (args: { input: object }) => Promise<unknown>, context: { commandName?: string }) =>
        async (args: { input: object }) => {
          if (context.commandName === 'SendMessageCommand') sends.push(args.input);
          return next(args);
        }) as never,
      { step: 'initialize', name: 'plainRelife' },
    );
    const slot = `slot:${type}:k:L#0`;
    const held = await leaseStore(env).tryAcquire(slot, 'other/0', 60_000, Date.now());
    if (!held.acquired) throw new Error('the slot is not free');
    try {
      const target = {
        clients: env.clients,
        names: {
          queueUrl: env.queueUrl,
          dlqUrl: env.dlqUrl,
          jobsTable: env.jobsTable,
          leasesTable: env.leasesTable,
        },
      };
      expect(await redrive(target, { filter: { dedupKey: key }, by: 'ops@test' })).toMatchObject({
        redriven: 1,
      });
      const redriven = sends.at(-1);
      const life = redriven?.MessageAttributes?.[LIFE_ATTRIBUTE]?.StringValue;
      expect(life).toBeDefined();
      for (let seen = 0; seen < RESEND_AT_RECEIVES - 1; ) {
        const out = await env.clients.sqs.send(
          new ReceiveMessageCommand({ QueueUrl: env.queueUrl, VisibilityTimeout: 0, WaitTimeSeconds: 1 }),
        );
        seen += out.Messages?.length ?? 0;
      }

      // Act: the bounce re-sends it; then the slot frees and it runs.
      const before = sends.length;
      const bounced = await eventually(async () => {
        await worker.poll(1);
        return worker.metrics.get(MetricName.LimitWait) > 0;
      });
      expect(bounced).toBe(true);
      const resent = sends.slice(before);
      await leaseStore(env).release(held.lease);
      expect(await drain(env, worker, 60_000)).toBe(true);

      // Assess: the re-send is the producer's body with the redrive's life; the job ran again once.
      expect(resent.map((m) => m.MessageBody)).toEqual([body]);
      expect(resent[0]?.MessageAttributes?.[LIFE_ATTRIBUTE]?.StringValue).toBe(life);
      expect(resent[0]?.MessageAttributes?.[ORIGIN_ATTRIBUTE]?.StringValue).toBeDefined();
      expect(runs).toEqual([key, key]);
      expect((await worker.store.get(key))?.status).toBe(JobStatus.Completed);
    } finally {
      env.clients.sqs.middlewareStack.remove('plainRelife');
    }
  }, 120_000);

  it('a plain body whose payload function threw is lettered with its key and type, and redriven with --payload-file', async () => {
    // Prepare: the payload function throws on a body the producer got wrong; key and type were read.
    const type = uniqueName('t_payfn');
    const runs: string[] = [];
    const job = defineJob({
      type,
      payload: z.object({ id: z.string(), tenant: z.string() }),
      async run(ctx) {
        runs.push(ctx.dedupKey);
        return { result: 'ok' };
      },
    });
    const registry = JobRegistry.of([job], {
      plainBodies: {
        type,
        key: 'ticket.id',
        payload: (d) => {
          const t = (d as { ticket: { tenant?: string } }).ticket;
          if (t.tenant === undefined) throw new Error('no tenant');
          return t;
        },
      },
    });
    const worker = makeWorker(env, registry);
    const key = uniqueName('tk');
    const sent = await sendRaw(env, JSON.stringify({ ticket: { id: key } }));
    expect(await drain(env, worker)).toBe(true);
    const [letter] = (await receiveAll(env, env.dlqUrl, 0, 2)).map((m) =>
      readDeadLetterAttributes(m.MessageAttributes),
    );
    expect(letter).toMatchObject({
      reason: 'invalid-plain-shape',
      originalMessageId: sent,
      dedupKey: key,
      type,
    });

    // Act: the operator sends the corrected payload under the key.
    const target = {
      clients: env.clients,
      names: {
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
      },
    };
    const report = await redrive(target, {
      filter: { dedupKey: key },
      by: 'ops@test',
      payload: { value: { id: key, tenant: 'T' } },
    });
    expect(report).toMatchObject({ redriven: 1 });
    expect(await drain(env, worker)).toBe(true);

    // Assess
    expect(runs).toEqual([key]);
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Completed);
  }, 60_000);

  it("a producer's re-send whose body differs is a payload mismatch unless payloadHash leaves the difference out", async () => {
    // Prepare: two types on two stacks' worth of keys; the producer stamps every send with its time.
    const strict = uniqueName('t_strict');
    const loose = uniqueName('t_loose');
    const runs: string[] = [];
    const jobOf = (type: string, payloadHash?: (p: { id: string }) => unknown) =>
      defineJob({
        type,
        payload: z.object({ id: z.string(), sentAt: z.string() }),
        ...(payloadHash ? { payloadHash } : {}),
        async run(ctx) {
          runs.push(ctx.dedupKey);
          return { result: 'ok' };
        },
      });
    const registry = JobRegistry.of([jobOf(strict), jobOf(loose, (p) => p.id)], {
      plainBodies: { type: { path: 'kind' }, key: 'id' },
    });
    const worker = makeWorker(env, registry);
    const [a, b] = [uniqueName('pa'), uniqueName('pb')];
    for (const [kind, id] of [
      [strict, a],
      [loose, b],
    ] as const) {
      await sendRaw(env, JSON.stringify({ kind, id, sentAt: '2026-12-03T10:00:00Z' }));
      expect(await drain(env, worker)).toBe(true);
      // The producer's retry after a timeout: the same order, stamped again.
      await sendRaw(env, JSON.stringify({ kind, id, sentAt: '2026-12-03T10:00:05Z' }));
      expect(await drain(env, worker)).toBe(true);
    }

    // Assess: each ran once; the strict type's re-send is lettered payload-mismatch, the loose one's dropped.
    expect(runs).toEqual([a, b]);
    const letters = (await receiveAll(env, env.dlqUrl, 30, 2)).map((m) =>
      readDeadLetterAttributes(m.MessageAttributes),
    );
    expect(letters).toEqual([expect.objectContaining({ reason: 'payload-mismatch', dedupKey: a })]);
    expect(worker.metrics.get(MetricName.DuplicateSkipped)).toBe(1);
  }, 60_000);

  it('a dead key past its deadKeyTtl runs a fresh plain send as a new job', async () => {
    const type = uniqueName('t_deadkey');
    const runs: string[] = [];
    let broken = true;
    const worker = makeWorker(env, ticketJob(type, runs, { deadKeyTtl: 1, broken: () => broken }));
    const key = uniqueName('tk');
    await sendRaw(env, ticket(key));
    expect(await drain(env, worker)).toBe(true);
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Dead);

    broken = false;
    await new Promise((r) => setTimeout(r, 1_500));
    await sendRaw(env, ticket(key));
    expect(await drain(env, worker)).toBe(true);

    expect(runs).toEqual([key, key]);
    expect((await worker.store.get(key))?.status).toBe(JobStatus.Completed);
  }, 60_000);

  it('on FIFO, plain bodies keep the group SQS gave them and run in order, the copy dropped', async () => {
    const fifo = await freshEnv('plainfifo', { fifo: true });
    const type = uniqueName('t_fifo');
    const runs: string[] = [];
    const worker = makeWorker(fifo, ticketJob(type, runs));
    const group = uniqueName('g');
    const keys = [uniqueName('f1'), uniqueName('f2'), uniqueName('f3')];
    for (const [i, key] of [...keys, keys[0] ?? ''].entries()) {
      await fifo.clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: fifo.queueUrl,
          MessageBody: ticket(key),
          MessageGroupId: group,
          MessageDeduplicationId: `${group}-${i}`,
        }),
      );
    }

    expect(await drain(fifo, worker)).toBe(true);

    expect(runs).toEqual(keys);
    for (const key of keys) expect((await worker.store.get(key))?.status).toBe(JobStatus.Completed);
  }, 60_000);
});
