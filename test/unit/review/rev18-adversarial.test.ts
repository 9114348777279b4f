import { Logger } from '@aws-lambda-powertools/logger';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { renewUpdate } from '../../../shared/core/adapters/dynamodb-job-expressions.ts';
import { giveUpError, MAX_ITEM_BYTES } from '../../../shared/core/adapters/dynamodb-limits.ts';
import { refusedClaim } from '../../../shared/core/adapters/dynamodb-refusals.ts';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import type { ClaimRequest, ClaimResult, JobLease, RenewOptions, StoreCallOptions } from '../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../shared/core/model/registry.ts';
import { InMemoryMetrics } from '../../../shared/core/observe/metrics.ts';
import { JobProcessor } from '../../../shared/core/pipeline/processor.ts';
import { PermanentJobError, StoreRefusedError, StoreUnavailableError } from '../../../shared/errors.ts';
import { defineJob } from '../../../shared/jobs/define-job.ts';
import { InMemoryJobStore } from '../../../shared/testing/in-memory-job-store.ts';
import { InMemoryQueue } from '../../../shared/testing/in-memory-queue.ts';

const KEY = 'job-1';
const TYPE = 'test.work';
const logger = new Logger({ logLevel: 'SILENT' });
const body = JSON.stringify(makeEnvelope({ id: 'e-1', type: TYPE, dedupKey: KEY, payload: { n: 1 } }));

beforeEach(() => vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') }));
afterEach(() => vi.useRealTimers());

/** The DynamoDB adapter's answer when the SDK resent a claim whose first answer was lost. */
class LostClaimAnswerStore extends InMemoryJobStore {
  loseNextClaimAnswer = false;
  override async claim(req: ClaimRequest, options: StoreCallOptions = {}): Promise<ClaimResult> {
    const out = await super.claim(req, options);
    if (!this.loseNextClaimAnswer || !out.claimed) return out;
    this.loseNextClaimAnswer = false;
    const item = await super.get(req.dedupKey);
    return refusedClaim(marshall(item, { removeUndefinedValues: true }) as Record<string, unknown>, req);
  }
}

/** Refuses, as DynamoDB does (ValidationException -> StoreRefusedError), a fence that grows the item past 400 KB. */
class ItemSizeStore extends InMemoryJobStore {
  override async renew(lease: JobLease, leaseMs: number, now: number, options: RenewOptions = {}): Promise<void> {
    if (options.deadLetter && lease.checkpoint) {
      const u = renewUpdate('jobs', lease, now + leaseMs, 0, options.deadLetter).ExpressionAttributeValues;
      const bytes =
        Buffer.byteLength(JSON.stringify(lease.checkpoint)) + 640 +
        Buffer.byteLength(String(u[':lastError'])) + Buffer.byteLength(String(u[':deadReason']));
      if (bytes > MAX_ITEM_BYTES) throw new StoreRefusedError('item-too-large', 'renew', `${bytes} bytes`);
    }
    return super.renew(lease, leaseMs, now, options);
  }
}

function world(store: InMemoryJobStore, run: (ctx: any) => Promise<unknown>) {
  let runs = 0;
  const work = defineJob({
    type: TYPE,
    payload: z.object({ n: z.number() }),
    async run(ctx: any) {
      runs += 1;
      return run(ctx);
    },
  } as any);
  const queue = new InMemoryQueue({ visibilitySeconds: 30 });
  const metrics = new InMemoryMetrics();
  const processor = (worker: string) =>
    new JobProcessor({
      store, queue, registry: JobRegistry.of([work]), worker, logger, metrics,
      leaseMs: 3000, maxAttempts: 3, backoff: { baseSeconds: 1, capSeconds: 1 }, random: () => 0.5,
    });
  const deliver = async (worker: string, afterMs = 0) => {
    await vi.advanceTimersByTimeAsync(afterMs);
    const [record] = queue.receive(1) as SQSRecord[];
    if (!record) throw new Error('no visible message');
    const p = processor(worker).process(record);
    await vi.advanceTimersByTimeAsync(5_000);
    return p;
  };
  return { store, queue, metrics, deliver, runs: () => runs };
}

describe('rev18 adversarial', () => {
  it('A: a lost claim answer (SDK resend, DynamoDB refusedClaim) drops the recorded deadReason: the permanently failed job runs again', async () => {
    const store = new LostClaimAnswerStore();
    const w = world(store, async () => {
      throw new PermanentJobError('closed');
    });
    w.queue.send(body);
    w.queue.faults.failNext('send-to-dead-letter'); // fence lands, the letter send fails: M kept
    expect((await w.deliver('w-a')).action).toBe('retry');
    expect((await store.get(KEY))?.deadReason).toBe('permanent-error');
    store.loseNextClaimAnswer = true;
    await w.deliver('w-b', 31_000);
    // Expected 1 run (the takeover finishes the dead-lettering); the own-claim result has no `previous`.
    expect(w.runs()).toBe(1);
  });

  it('B: the E9 fence writes the full error text, not giveUpError’s room: near 400 KB the fence is refused and the job loops', async () => {
    const big = 'x'.repeat(408_000);
    const lease: JobLease = {
      dedupKey: KEY, owner: 'w', token: 1, attempts: 1, messageId: 'm', version: 2, leaseUntil: 0,
      checkpoint: { step: 'a', done: ['a'], data: { a: big }, at: 0 },
    };
    const cause = { reason: 'permanent-error', errorClass: 'PermanentJobError', errorMessage: 'e'.repeat(900) };
    const room = giveUpError(lease, { message: cause.errorMessage, errorClass: cause.errorClass });
    const fence = renewUpdate('jobs', lease, 1, 1, cause).ExpressionAttributeValues;
    // markDead would store room.message (279 chars); the fence stores all 900.
    expect([String(fence[':lastError']).length, room.message.length]).toEqual([900, 279]);

    const w = world(new ItemSizeStore(), async (ctx) => {
      await ctx.step('a', async () => ({ data: big }));
      throw new PermanentJobError('e'.repeat(900));
    });
    w.queue.send(body);
    const first = await w.deliver('w-a');
    const second = await w.deliver('w-b', 31_000);
    const item = await w.store.get(KEY);
    console.log('B', item?.lastErrorClass, String(item?.lastError).slice(0,300), first.action, second.action, w.runs(), item?.status, item?.attempts, item?.deadReason, w.queue.deadLetters.length, w.queue.size);
    expect([first.action, w.runs()]).toEqual(['dead-lettered', 1]);
  });

  it('C: a refund release whose answer was lost is retried and read as lease-lost (M not given back)', async () => {
    const store = new InMemoryJobStore();
    const w = world(store, async () => {
      throw new StoreUnavailableError('effect-read', new Error('throttled'));
    });
    w.queue.send(body);
    store.faults.failNext('release', undefined, { when: 'after' });
    const out = await w.deliver('w-a');
    expect((await store.get(KEY))).toMatchObject({ status: JobStatus.RetryWait, refunds: 1, attempts: 0 });
    console.log('C', out.action, w.metrics);
    expect(out.action).toBe('retry');
  });
});

import { planRedrive } from '../../../shared/ops/dlq-redrive.ts';
describe('rev18 redrive', () => {
  it('D: an invalid-bad-payload letter (never claimed, attempts 0) resets the same-type job item of another message', () => {
    const now = Date.parse('2026-12-01T00:00:00Z');
    const item = {
      dedupKey: KEY, type: TYPE, status: JobStatus.InProgress, leaseUntil: now - 16 * 60_000, token: 5,
      attempts: 2, version: 3, messageId: 'm-good', deadReason: 'permanent-error', createdAt: '', expiresAt: 0,
    } as any;
    expect(planRedrive(item, now, TYPE).action).not.toBe('reset-and-send');
  });
});
