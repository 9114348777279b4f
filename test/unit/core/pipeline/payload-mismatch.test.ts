import { createHash } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import type { PayloadRef, PayloadStore } from '../../../../shared/core/contract/payload-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { versionedPut } from '../../../../shared/core/decisions/optimistic.ts';
import {
  canonicalJson,
  decideMismatch,
  type PayloadMismatch,
  payloadHash,
} from '../../../../shared/core/decisions/payload-hash.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { CompletedCache } from '../../../../shared/core/pipeline/completed-cache.ts';
import { JobProcessor, type RecordOutcome } from '../../../../shared/core/pipeline/processor.ts';
import { TransientJobError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { planRedrive } from '../../../../shared/ops/dlq-redrive-plan.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// Issue 34, item 3: a message whose dedupKey names a job of its type with another payload is not a copy.
// The pure decision, then the processor on the shipped store over the in-memory DynamoDB under fake
// timers; the emulator twin is test/integration/core/pipeline/payload-mismatch.test.ts.

const KEY = 'order-1';
const NOW = Date.parse('2026-12-01T00:00:00Z');

describe('Function: payloadHash', () => {
  it('is the same for the same JSON in another key order, 22 characters of base64url', () => {
    const a = payloadHash({ order: 'o-1', lines: [{ sku: 'x', qty: 1 }], note: undefined });
    expect(a).toBe(payloadHash({ lines: [{ qty: 1, sku: 'x' }], order: 'o-1' }));
    expect(a).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(payloadHash({ order: 'o-1', lines: [{ sku: 'x', qty: 2 }] })).not.toBe(a);
  });

  it('takes only what the selector returns', () => {
    const select = (p: { id: string; sentAt: string }) => ({ id: p.id });
    expect(payloadHash({ id: '1', sentAt: 'a' }, select as never)).toBe(
      payloadHash({ id: '1', sentAt: 'b' }, select as never),
    );
  });

  it('writes JSON as JSON.stringify does, keys sorted', () => {
    expect(canonicalJson({ b: [1, undefined, Number.NaN], a: 'é', d: new Date(0), c: null })).toBe(
      '{"a":"é","b":[1,null,null],"c":null,"d":"1970-01-01T00:00:00.000Z"}',
    );
  });
});

describe('Function: decideMismatch', () => {
  const item = (over: Partial<JobItem>): JobItem => ({
    dedupKey: KEY,
    status: JobStatus.Completed,
    leaseUntil: 0,
    token: 1,
    attempts: 1,
    version: 2,
    messageId: 'm-1',
    type: 't',
    payloadHash: 'H1',
    ...over,
  });
  const decide = (over: Partial<JobItem>, hash: string | undefined, policy?: PayloadMismatch) =>
    decideMismatch(item(over), hash, policy, NOW, { messageId: 'm-2', minWaitMs: 5000 });

  it('reports nothing for the same hash, an item or a message without one, or a cancelled key', () => {
    expect(decide({}, 'H1')).toBeUndefined();
    expect(decide({ payloadHash: undefined }, 'H2')).toBeUndefined();
    expect(decide({}, undefined)).toBeUndefined();
    expect(decide({ status: JobStatus.Cancelled }, 'H2')).toBeUndefined();
    expect(decide({}, 'H2', 'copy')).toBeUndefined();
  });

  it('letters by default, in every state but cancelled; a dead key past its deadKeyUntil is a fresh send', () => {
    for (const status of [JobStatus.Completed, JobStatus.Dead, JobStatus.InProgress, JobStatus.RetryWait]) {
      expect(decide({ status, leaseUntil: NOW + 1000 }, 'H2')).toEqual({
        kind: 'letter',
        hashes: { job: 'H1', message: 'H2' },
      });
    }
    expect(decide({ status: JobStatus.Dead, deadKeyUntil: NOW - 1 }, 'H2')).toBeUndefined();
  });

  it("new-job: a finished job's key is renewed, an unfinished one waits for its lease (or a lease's time)", () => {
    expect(decide({}, 'H2', 'new-job')?.kind).toBe('new-life');
    expect(decide({ status: JobStatus.Dead }, 'H2', 'new-job')?.kind).toBe('new-life');
    expect(decide({ status: JobStatus.InProgress, leaseUntil: NOW + 3000 }, 'H2', 'new-job')).toMatchObject({
      kind: 'wait',
      hideForMs: 3000,
    });
    expect(decide({ status: JobStatus.RetryWait, leaseUntil: NOW - 1 }, 'H2', 'new-job')).toMatchObject({
      kind: 'wait',
      hideForMs: 5000,
    });
  });
});

function setup(
  policy?: PayloadMismatch,
  options: {
    cache?: boolean;
    fast?: boolean;
    deadKeyTtl?: number;
    payloads?: PayloadStore;
    fifo?: boolean;
  } = {},
) {
  const { store, row, doc } = memoryStores({ tables: { ledger: 'account' } });
  const queue = new InMemoryQueue({ visibilitySeconds: 10 });
  const metrics = new InMemoryMetrics();
  const ran: string[] = [];
  const balance = (account: string) =>
    (row('ledger', { account }) as { balance: number } | undefined)?.balance ?? 0;
  const credit = (account: string, amount: number) => {
    const stored = row('ledger', { account }) as { balance: number; version: number } | undefined;
    return versionedPut({
      tableName: 'ledger',
      key: { account },
      seenVersion: stored?.version,
      item: { balance: (stored?.balance ?? 0) + amount },
    });
  };
  const pay = defineJob({
    type: 'order.pay',
    payload: z.object({ account: z.string(), amount: z.number(), sentAt: z.string().optional() }),
    ...(policy === undefined ? {} : { onPayloadMismatch: policy }),
    payloadHash: (p) => ({ account: p.account, amount: p.amount }),
    ...(options.fast ? { fastPath: true } : {}),
    ...(options.deadKeyTtl === undefined ? {} : { deadKeyTtl: options.deadKeyTtl }),
    async run(ctx, p) {
      ran.push(`${p.amount}#${ctx.attempt}`);
      if (p.amount < 0) throw new TransientJobError('refused by the bank');
      return { effects: [credit(p.account, p.amount)], result: 'paid' };
    },
  });
  const cache = options.cache ? new CompletedCache() : undefined;
  const processor = new JobProcessor({
    store,
    queue,
    registry: JobRegistry.of([pay]),
    worker: 'w-1',
    logger: new Logger({ logLevel: 'SILENT' }),
    metrics,
    leaseMs: 3000,
    maxAttempts: 2,
    backoff: { baseSeconds: 1, capSeconds: 1 },
    random: () => 0.5,
    ...(cache ? { cache } : {}),
    ...(options.payloads ? { payloads: options.payloads } : {}),
  });
  let n = 0;
  const send = (payload: unknown) =>
    queue.send(
      JSON.stringify(makeEnvelope({ id: `e-${++n}`, type: 'order.pay', dedupKey: KEY, payload })),
      options.fifo ? { groupId: 'g-1' } : {},
    );
  const run = async (id: string): Promise<RecordOutcome> => {
    const [record] = queue.receive(1, { pick: (visible) => visible.filter((m) => m.messageId === id) });
    if (!record) throw new Error(`message ${id} is not visible`);
    // A FIFO queue numbers its messages in their group: what tells the worker it is one.
    if (options.fifo)
      Object.assign(record.attributes, { SequenceNumber: String(++n), MessageGroupId: 'g-1' });
    const pending = processor.process(record as SQSRecord);
    await vi.advanceTimersByTimeAsync(50);
    const done = await pending;
    if (done.disposition === 'delete') await queue.delete(record.receiptHandle);
    return done;
  };
  /** A claim-check envelope: its payload is the object `ref` names. */
  const sendRef = (ref: PayloadRef) => {
    const { payload: _p, ...rest } = makeEnvelope({
      id: `e-${++n}`,
      type: 'order.pay',
      dedupKey: KEY,
      payload: null,
    });
    return queue.send(JSON.stringify({ ...rest, payloadRef: ref }));
  };
  return { store, doc, queue, metrics, ran, balance, send, sendRef, run };
}

beforeEach(() => {
  vi.useFakeTimers({ now: NOW });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('A duplicate with another payload (issue 34, item 3)', () => {
  it('is dead-lettered payload-mismatch with both hashes, never run, the completed job untouched but for its event', async () => {
    const t = setup();
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('completed');
    const done = await t.store.get(KEY);
    expect(done?.payloadHash).toBe(payloadHash({ account: 'a', amount: 5 }));

    const otherId = t.send({ account: 'a', amount: 7 });
    expect((await t.run(otherId)).action).toBe('dead-lettered');

    const job = done?.payloadHash ?? '';
    const message = payloadHash({ account: 'a', amount: 7 });
    expect(t.queue.deadLetters.map((l) => l.reason)).toEqual([
      expect.objectContaining({ reason: 'payload-mismatch', attempts: 0, payloadHashes: { job, message } }),
    ]);
    expect(t.ran).toEqual(['5#1']);
    expect(t.balance('a')).toBe(5);
    const after = await t.store.get(KEY);
    expect(after?.history).toEqual([
      { e: 'mismatch', at: expect.any(Number), messageId: otherId, hash: job, got: message },
    ]);
    const { history: _, ...rest } = after ?? ({} as JobItem);
    expect(rest).toEqual(done);
    expect(t.metrics.get('PayloadMismatch')).toBe(1);

    // A true copy (a field outside payloadHash differs) is still a duplicate.
    expect((await t.run(t.send({ account: 'a', amount: 5, sentAt: 'later' }))).action).toBe('duplicate');
  });

  it('never takes a job waiting for its retry: the waiting job runs on its own payload', async () => {
    const t = setup();
    const failing = t.send({ account: 'a', amount: -1 });
    expect((await t.run(failing)).action).toBe('retry');
    await vi.advanceTimersByTimeAsync(2000);
    const before = await t.store.get(KEY);
    expect((await t.run(t.send({ account: 'a', amount: 9 }))).action).toBe('dead-lettered');
    expect(t.ran).toEqual(['-1#1']);
    const { history: _h, ...kept } = (await t.store.get(KEY)) ?? ({} as JobItem);
    const { history: _b, ...was } = before ?? ({} as JobItem);
    expect(kept).toEqual(was);
  });

  it('copy: taken as a duplicate, no hash on the item', async () => {
    const t = setup('copy');
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('completed');
    expect((await t.store.get(KEY))?.payloadHash).toBeUndefined();
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('duplicate');
    expect(t.ran).toEqual(['5#1']);
    expect(t.queue.deadLetters).toEqual([]);
  });

  it('new-job: runs as a new job of the key once the completed one ended, with a new hash and token', async () => {
    const t = setup('new-job');
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('completed');
    const first = await t.store.get(KEY);
    const otherId = t.send({ account: 'a', amount: 7 });
    expect((await t.run(otherId)).action).toBe('completed');
    expect(t.ran).toEqual(['5#1', '7#1']);
    expect(t.balance('a')).toBe(12);
    const item = await t.store.get(KEY);
    expect(item).toMatchObject({
      status: JobStatus.Completed,
      attempts: 1,
      messageId: otherId,
      payloadHash: payloadHash({ account: 'a', amount: 7 }),
    });
    expect(item?.token).toBeGreaterThan(first?.token ?? 0);
    expect(item?.history).toEqual([
      expect.objectContaining({ e: 'mismatch', newJob: true, messageId: otherId }),
    ]);
    // A copy of the new job is a duplicate; the old payload is now the mismatch.
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('duplicate');
    expect(t.metrics.get('PayloadMismatch')).toBe(1);
  });

  it("new-job: a redrive's message of the key's earlier life is dropped by the new job, never run over it", async () => {
    const t = setup('new-job');
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('completed');
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('completed');
    // A redrive of the first job's letter sent for life 0 (leaseq-life), arriving after the new job.
    const body = JSON.stringify(
      makeEnvelope({ id: 'e-old', type: 'order.pay', dedupKey: KEY, payload: { account: 'a', amount: 5 } }),
    );
    const old = t.queue.send(body, {
      attributes: { 'leaseq-life': { dataType: 'String', stringValue: '0' } },
    });
    // A copy of a finished job of another life: dropped, never a mismatch nor a new job.
    expect((await t.run(old)).action).toBe('duplicate');
    expect(t.ran).toEqual(['5#1', '7#1']);
    expect(t.balance('a')).toBe(12);
    expect((await t.store.get(KEY))?.life).toBe(1);
  });

  it('new-job: waits while the job under the key is unfinished, then runs after it', async () => {
    const t = setup('new-job');
    const failing = t.send({ account: 'a', amount: -1 });
    expect((await t.run(failing)).action).toBe('retry');
    const otherId = t.send({ account: 'a', amount: 7 });
    expect((await t.run(otherId)).action).toBe('own-message-early');
    expect(t.ran).toEqual(['-1#1']);
    // The failing job's second attempt dies (maxAttempts 2): DEAD, its key ended.
    await vi.advanceTimersByTimeAsync(2000);
    expect((await t.run(failing)).action).toBe('dead-lettered');
    await vi.advanceTimersByTimeAsync(10_000);
    expect((await t.run(otherId)).action).toBe('completed');
    expect(t.ran).toEqual(['-1#1', '-1#2', '7#1']);
    expect(await t.store.get(KEY)).toMatchObject({ status: JobStatus.Completed, messageId: otherId });
  });

  it('the fast path writes the hash, and its commit refuses another payload', async () => {
    const t = setup(undefined, { fast: true });
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('completed');
    expect((await t.store.get(KEY))?.payloadHash).toBe(payloadHash({ account: 'a', amount: 5 }));
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('dead-lettered');
    expect(t.balance('a')).toBe(5);
    expect(t.queue.deadLetters[0]?.reason.reason).toBe('payload-mismatch');
  });

  it('fast path, new-job: a finished key is renewed by the leased claim', async () => {
    const t = setup('new-job', { fast: true });
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('completed');
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('completed');
    expect(t.balance('a')).toBe(12);
  });

  it('the local cache does not drop a message of another payload', async () => {
    const t = setup(undefined, { cache: true });
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('completed');
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('dead-lettered');
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('duplicate');
  });

  it('an item written before hashes reports no mismatch (upgrade path)', async () => {
    const t = setup();
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('completed');
    const item = (await t.store.get(KEY)) as JobItem;
    const { payloadHash: _, ...older } = item;
    await t.doc.send(new PutCommand({ TableName: 'jobs', Item: older }));
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('duplicate');
    expect(t.queue.deadLetters).toEqual([]);
  });

  it('a cancelled job drops a message of another payload as a cancelled copy', async () => {
    const t = setup();
    expect((await t.run(t.send({ account: 'a', amount: -1 }))).action).toBe('retry');
    await t.store.cancel?.(KEY, { now: Date.now(), by: 'test' });
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('cancelled-copy');
    expect(t.queue.deadLetters).toEqual([]);
  });

  it('a dead key past its deadKeyTtl takes another payload as a fresh send (a new life, no mismatch)', async () => {
    const t = setup(undefined, { deadKeyTtl: 1 });
    const failing = t.send({ account: 'a', amount: -1 });
    expect((await t.run(failing)).action).toBe('retry');
    await vi.advanceTimersByTimeAsync(2000);
    expect((await t.run(failing)).action).toBe('dead-lettered');
    await vi.advanceTimersByTimeAsync(2000);
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('completed');
    expect((await t.store.get(KEY))?.payloadHash).toBe(payloadHash({ account: 'a', amount: 7 }));
    expect(t.queue.deadLetters.map((l) => l.reason.reason)).toEqual(['max-attempts']);
  });

  it("an edited redrive stores the edit's hash: its message runs, the old payload is the mismatch", async () => {
    const t = setup();
    const failing = t.send({ account: 'a', amount: -1 });
    expect((await t.run(failing)).action).toBe('retry');
    await vi.advanceTimersByTimeAsync(2000);
    expect((await t.run(failing)).action).toBe('dead-lettered');
    const edited = payloadHash({ account: 'a', amount: 3 });
    expect(
      await t.store.resetForRedrive(KEY, Date.now(), Date.now(), {
        by: 'op',
        edited: true,
        payloadHash: edited,
      }),
    ).toBe(true);
    expect((await t.store.get(KEY))?.payloadHash).toBe(edited);
    expect((await t.run(t.send({ account: 'a', amount: 3 }))).action).toBe('completed');
    expect(t.balance('a')).toBe(3);
  });

  it('an edited redrive whose hash is unknown removes it: the next claim stores its message’s', async () => {
    const t = setup();
    const failing = t.send({ account: 'a', amount: -1 });
    expect((await t.run(failing)).action).toBe('retry');
    expect(
      await t.store.resetForRedrive(KEY, Date.now() + 5000, Date.now() + 5000, { by: 'op', edited: true }),
    ).toBe(true);
    expect((await t.store.get(KEY))?.payloadHash).toBeUndefined();
    expect((await t.run(t.send({ account: 'a', amount: 3 }))).action).toBe('completed');
    expect((await t.store.get(KEY))?.payloadHash).toBe(payloadHash({ account: 'a', amount: 3 }));
  });
});

describe('FIFO', () => {
  it('letters a message of another payload into its group; a new-job one waits at its head, not re-sent', async () => {
    const t = setup(undefined, { fifo: true });
    expect((await t.run(t.send({ account: 'a', amount: 5 }))).action).toBe('completed');
    expect((await t.run(t.send({ account: 'a', amount: 7 }))).action).toBe('dead-lettered');
    expect(t.queue.deadLetters).toEqual([
      expect.objectContaining({
        groupId: 'g-1',
        reason: expect.objectContaining({ reason: 'payload-mismatch' }),
      }),
    ]);

    const r = setup('new-job', { fifo: true });
    expect((await r.run(r.send({ account: 'a', amount: -1 }))).action).toBe('retry');
    const waiting = r.send({ account: 'a', amount: 7 });
    expect((await r.run(waiting)).action).toBe('own-message-early');
    // Given back, not re-sent: still the one message, hidden.
    expect(
      r.queue.receive(10, { pick: (visible) => visible.filter((m) => m.messageId === waiting) }),
    ).toEqual([]);
    expect(r.ran).toEqual(['-1#1']);
  });
});

describe('A claim-checked payload (S3)', () => {
  it('is hashed as its payload, not its pointer: another object of the same payload is a copy, another payload a mismatch', async () => {
    const objects: Record<string, string> = {
      'payloads/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f11.json': JSON.stringify({
        account: 'a',
        amount: 5,
      }),
      'payloads/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f12.json': JSON.stringify({
        amount: 5,
        account: 'a',
      }),
      'payloads/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f13.json': JSON.stringify({
        account: 'a',
        amount: 6,
      }),
    };
    const ref = (key: string): PayloadRef => {
      const text = objects[key] ?? '';
      const sha256 = createHash('sha256').update(text, 'utf8').digest('hex');
      return { bucket: 'b-payloads', key, bytes: Buffer.byteLength(text), sha256 };
    };
    const payloads: PayloadStore = {
      bucket: 'b-payloads',
      put: async () => ref('payloads/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f11.json'),
      get: async (r) => objects[r.key] ?? '',
    };
    const t = setup(undefined, { payloads });
    const firstRef = await t.run(
      t.sendRef(ref('payloads/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f11.json')),
    );
    expect(t.queue.deadLetters.map((l) => l.reason.errorMessage)).toEqual([]);
    expect(firstRef.action).toBe('completed');
    expect((await t.store.get(KEY))?.payloadHash).toBe(payloadHash({ account: 'a', amount: 5 }));
    expect(
      (await t.run(t.sendRef(ref('payloads/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f12.json')))).action,
    ).toBe('duplicate');
    expect(
      (await t.run(t.sendRef(ref('payloads/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f13.json')))).action,
    ).toBe('dead-lettered');
    expect(t.balance('a')).toBe(5);
  });
});

describe('Function: planRedrive (a payload-mismatch letter)', () => {
  it('is skipped with a reason while the job under its key stands, sent once its dead key reopened', () => {
    const item = {
      dedupKey: KEY,
      status: JobStatus.Completed,
      leaseUntil: 0,
      token: 1,
      attempts: 1,
      version: 2,
      messageId: 'm-1',
      type: 't',
      payloadHash: 'H1',
    } as JobItem;
    const letter = { type: 't', reason: 'payload-mismatch', attempts: 0, messageId: 'm-2', recorded: true };
    expect(planRedrive(item, NOW, letter)).toMatchObject({ action: 'skip', skip: 'payload-mismatch' });
    expect(planRedrive({ ...item, status: JobStatus.Dead }, NOW, letter)).toMatchObject({
      skip: 'payload-mismatch',
    });
    expect(
      planRedrive({ ...item, status: JobStatus.Dead, deadKeyUntil: NOW - 1 }, NOW, letter),
    ).toMatchObject({
      action: 'send',
    });
    expect(planRedrive(undefined, NOW, letter)).toMatchObject({ action: 'send' });
  });
});
