// A job's history kept by the store (docs/protocol.md, "History"), against the emulator's DynamoDB: the
// events land with the writes that already happen (list_append, if_not_exists, the problems index keys),
// `leaseq inspect` tells them in order, a first-time success writes none, and a dead key runs again only
// after its type's deadKeyTtl.
import { marshall } from '@aws-sdk/util-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeEntry } from '../../../../cli/commands/inspect.ts';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { problemShard } from '../../../../shared/core/contract/job-history.ts';
import type { ClaimRequest, JobLease } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { LeaseLostError, PermanentJobError } from '../../../../shared/errors.ts';
import { inspectJob } from '../../../../shared/ops/inspect.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  sendJob,
  sleep,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { freshQueues } from '../../../support/fresh-queues.ts';

let base: CoreEnv;
let env: CoreEnv;
let store: DynamoDbJobStore;

beforeAll(async () => {
  base = await coreEnv('history');
  store = new DynamoDbJobStore({ client: base.clients.doc, tableName: base.jobsTable });
});
afterAll(() => base?.close());
beforeEach(async () => {
  env = await freshQueues(base);
});

function request(dedupKey: string, owner: string, leaseMs: number): ClaimRequest {
  return {
    dedupKey,
    owner,
    messageId: uniqueName('m'),
    type: 'test.history',
    createdAt: new Date().toISOString(),
    leaseMs,
    now: Date.now(),
  };
}

async function claimed(req: ClaimRequest): Promise<{ lease: JobLease; kind: string }> {
  const result = await store.claim(req);
  if (!result.claimed) throw new Error(`expected a claim, item is ${JSON.stringify(result.existing)}`);
  return { lease: result.lease, kind: result.kind };
}

/** Bytes DynamoDB counts for an item: attribute names and values, as the SDK marshals them (an estimate). */
function itemBytes(item: object): number {
  return Buffer.byteLength(JSON.stringify(marshall(item, { removeUndefinedValues: true })));
}

const target = () => ({
  clients: env.clients,
  names: {
    queueUrl: env.queueUrl,
    dlqUrl: env.dlqUrl,
    jobsTable: env.jobsTable,
    leasesTable: env.leasesTable,
  },
});

describe('The job history (against the emulator)', () => {
  it('records a failure, a takeover, the lost lease and the dead-lettering, in order, with owners and tokens', async () => {
    // Prepare: attempt 1 (w-a) fails and releases; attempt 2 (w-b) claims with a short lease and stalls.
    const key = uniqueName('hist');
    const a = await claimed(request(key, 'w-a', 5000));
    await store.release(a.lease, Date.now() + 50, {
      message: `boom ${'x'.repeat(500)}`,
      errorClass: 'TransientJobError',
    });
    await sleep(80);
    const b = await claimed(request(key, 'w-b', 300));
    expect(b.kind).toBe('retry');
    await sleep(400);

    // Act: w-c takes w-b's ended lease over; w-b learns it lost the lease (its renewal is fenced out) and
    // records it; w-c's next write (the DEAD marking) carries its takeover event.
    const c = await claimed(request(key, 'w-c', 5000));
    expect(c.kind).toBe('takeover');
    expect(c.lease.pendingHistory).toHaveLength(1);
    await expect(store.renew(b.lease, 5000, Date.now())).rejects.toBeInstanceOf(LeaseLostError);
    await store.recordLeaseLost(b.lease, 'renew refused: the job was taken over', Date.now());
    await store.markDead(
      c.lease,
      { message: 'no way', errorClass: 'PermanentJobError', reason: 'permanent-error' },
      {},
    );

    // Assess: the stored events and the problems index keys.
    const item = await store.get(key);
    expect(item?.status).toBe(JobStatus.Dead);
    expect(item?.deadAt).toBeGreaterThan(0);
    expect(item?.deadKeyUntil).toBeUndefined();
    expect(item?.problemShard).toBe(problemShard(key));
    expect(item?.problemAt).toBe(item?.deadAt);
    expect(item?.history?.map((e) => e.e)).toEqual(['failed', 'lease-lost', 'takeover', 'dead']);
    const [failed, lost, takeover, dead] = item?.history ?? [];
    expect(failed).toMatchObject({
      owner: 'w-a',
      token: a.lease.token,
      attempt: 1,
      errorClass: 'TransientJobError',
    });
    expect(failed?.e === 'failed' && failed.message.length).toBe(240);
    expect(lost).toMatchObject({ owner: 'w-b', token: b.lease.token, attempt: 2 });
    expect(takeover).toMatchObject({
      owner: 'w-c',
      token: c.lease.token,
      attempt: 3,
      fromOwner: 'w-b',
      fromToken: b.lease.token,
      fromAttempt: 2,
    });
    expect(dead).toMatchObject({ owner: 'w-c', token: c.lease.token, reason: 'permanent-error' });
    expect(c.lease.pendingHistory).toBeUndefined();

    // ... and `leaseq inspect`'s timeline, in time order (the takeover was claimed before w-b noticed).
    const report = await inspectJob(target(), key);
    expect(report?.timeline.map((e) => e.kind)).toEqual([
      'created',
      'failed',
      'takeover',
      'lease-lost',
      'dead',
    ]);
    expect(report?.deadKey).toEqual({ droppedUntil: 'ttl' });
    const lines = (report?.timeline ?? []).map((e) => describeEntry(e));
    expect(lines[1]).toMatch(
      /failed +attempt 1, owner w-a, token \d+ +attempt 1 failed +TransientJobError: boom/,
    );
    expect(lines[2]).toMatch(
      new RegExp(`takeover +attempt 3, owner w-c, token ${c.lease.token} .*lease of w-b`),
    );
    expect(lines[3]).toMatch(/lease-lost +attempt 2, owner w-b/);
    expect(lines[4]).toMatch(/dead +attempt 3, owner w-c.*dead-lettered: permanent-error/);
  });

  it('writes no history and no problems index keys for a first-time success, fast or leased', async () => {
    // Prepare
    const registry = new JobRegistry()
      .register({ type: 'test.ok', payload: z.object({}), run: async () => ({ result: { ok: true } }) })
      .register({
        type: 'test.ok-fast',
        fastPath: true,
        payload: z.object({}),
        run: async () => ({ result: { ok: true } }),
      });
    const worker = makeWorker(env, registry);
    const leased = uniqueName('ok');
    const fast = uniqueName('okf');

    // Act
    await sendJob(env, { dedupKey: leased, type: 'test.ok', payload: {} });
    await sendJob(env, { dedupKey: fast, type: 'test.ok-fast', payload: {} });
    const done = await eventually(async () => {
      await worker.poll(1);
      const items = await Promise.all([store.get(leased), store.get(fast)]);
      return items.every((i) => i?.status === JobStatus.Completed);
    }, 20_000);

    // Assess
    expect(done).toBe(true);
    for (const key of [leased, fast]) {
      const item = await store.get(key);
      expect(item).toBeDefined();
      if (!item) continue;
      expect(item.history).toBeUndefined();
      expect(item.problemShard).toBeUndefined();
      expect(item.problemAt).toBeUndefined();
      expect(item.deadAt).toBeUndefined();
      expect(itemBytes(item)).toBeLessThan(1024);
    }
  });

  it('drops a copy of a dead key before its deadKeyTtl (counted), and runs a fresh send after it as a new job', async () => {
    // Prepare: a job type whose dead keys stay dead for 3 s; its first message fails permanently.
    const runs: string[] = [];
    const registry = new JobRegistry().register({
      type: 'test.history',
      deadKeyTtl: 3,
      payload: z.object({ fail: z.boolean() }),
      run: async (ctx, p) => {
        runs.push(`${ctx.attempt}`);
        if (p.fail) throw new PermanentJobError('broken');
        return { result: { ok: true } };
      },
    });
    const worker = makeWorker(env, registry);
    const key = uniqueName('ttl');
    await sendJob(env, { dedupKey: key, type: 'test.history', payload: { fail: true } });
    expect(
      await eventually(async () => {
        await worker.poll(1);
        return (await store.get(key))?.status === JobStatus.Dead;
      }),
    ).toBe(true);
    const dead = await store.get(key);
    expect(dead?.deadKeyUntil).toBe((dead?.deadAt ?? 0) + 3000);

    // Act 1: two copies before the TTL ends are dropped and counted in one `dropped` event (copies: the
    // same payload; another one would be dead-lettered payload-mismatch).
    for (let i = 0; i < 2; i++) {
      await sendJob(env, { dedupKey: key, type: 'test.history', payload: { fail: true } });
      await worker.poll(1);
    }
    const counted = await store.get(key);

    // Assess 1
    expect(runs).toEqual(['1']);
    expect(counted?.status).toBe(JobStatus.Dead);
    expect(counted?.history?.at(-1)).toMatchObject({ e: 'dropped', count: 2 });
    expect(worker.metrics.get(MetricName.DeadCopyDropped)).toBe(2);
    const report = await inspectJob(target(), key);
    expect(report?.deadKey).toEqual({ droppedUntil: dead?.deadKeyUntil });

    // Act 2: after the TTL a fresh send runs as a new job.
    await sleep(Math.max(0, (dead?.deadKeyUntil ?? 0) - Date.now() + 100));
    await sendJob(env, { dedupKey: key, type: 'test.history', payload: { fail: false } });
    const ran = await eventually(async () => {
      await worker.poll(1);
      return (await store.get(key))?.status === JobStatus.Completed;
    });

    // Assess 2
    expect(ran).toBe(true);
    expect(runs).toEqual(['1', '1']);
    const item = await store.get(key);
    expect(item).toMatchObject({ status: JobStatus.Completed, attempts: 1 });
    expect(item?.deadReason).toBeUndefined();
    expect(item?.deadAt).toBeUndefined();
    expect(item?.checkpoint).toBeUndefined();
    expect(item?.history?.map((e) => e.e)).toEqual(['dead', 'dropped', 'reset']);
    expect(item?.history?.at(-1)).toMatchObject({ e: 'reset', wasDeadAt: dead?.deadAt, attempt: 1 });
    // Completion leaves the problems index keys as the dead-lettering set them.
    expect(item?.problemAt).toBe(dead?.problemAt);
  });
});
