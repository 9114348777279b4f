import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope, parseEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { JobLog } from '../../../../shared/core/observe/job-log.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { claim, startAttempt } from '../../../../shared/core/pipeline/claim.ts';
import { DeadLetterer } from '../../../../shared/core/pipeline/dead-letterer.ts';
import { RESEND_AT_RECEIVES } from '../../../../shared/core/pipeline/limit-bounce.ts';
import { ORIGIN_ATTRIBUTE, RecordMessage } from '../../../../shared/core/pipeline/record-message.ts';
import { settleFailure } from '../../../../shared/core/pipeline/release.ts';
import { resolveSettings } from '../../../../shared/core/pipeline/settings.ts';
import { OptimisticConflictError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// Issue 31 item 9: an optimistic conflict that outlasted its in-process tries is someone else's write,
// not the job's failure. settleFailure on the in-memory store and queue, under fake timers: the attempt
// the claim counted is taken back and counted in the item's `conflicts`, the message waits the conflict
// backoff, the give-back is counted as ConflictRetries (not JobRetried), and past maxConflicts the job
// ends DEAD `max-conflicts`. The hot-row burst on the emulator: test/integration/core/pipeline/hot-row-burst.test.ts.

const KEY = 'order-1';
const TYPE = 'stock.reserve';
const MAX_ATTEMPTS = 3;
const MAX_CONFLICTS = 2;

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-03T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const reserve = defineJob({ type: TYPE, payload: z.object({ sku: z.string() }), run: async () => undefined });
const body = JSON.stringify(makeEnvelope({ id: 'e-1', type: TYPE, dedupKey: KEY, payload: { sku: 'a' } }));
const conflict = () =>
  new OptimisticConflictError('completion', 3, undefined, 'versionedPut to table stock: expected version 3');

function world() {
  const { doc, store } = memoryStores();
  const queue = new InMemoryQueue({ visibilitySeconds: 30 });
  const metrics = new InMemoryMetrics();
  const registry = JobRegistry.of([reserve]);
  const logger = new Logger({ logLevel: 'SILENT' });
  const s = resolveSettings({
    store,
    queue,
    registry,
    worker: 'w-a',
    logger,
    metrics,
    leaseMs: 3000,
    maxAttempts: MAX_ATTEMPTS,
    maxConflicts: MAX_CONFLICTS,
    // Conflict n waits round(min(30, 4 × 2^(n−1)) × 0.5) s: 2 s, 4 s, 8 s.
    conflictBackoff: { baseSeconds: 4, capSeconds: 30 },
    random: () => 0.5,
    now: () => Date.now(),
  });
  const deadLetterer = new DeadLetterer({
    store,
    queue,
    metrics,
    worker: 'w-a',
    backoffSeconds: s.backoffSeconds,
    callBudgetMs: s.leaseMs,
  });

  /** Receives the visible message, claims it as the processor does, and ends the attempt in a conflict. */
  const conflictOnce = async (): Promise<{ record: SQSRecord; action: string; attempts: number }> => {
    const [record] = queue.receive(1);
    if (!record) throw new Error('no visible message');
    const log = new JobLog(logger, { dedupKey: KEY, worker: 'w-a' });
    const envelope = parseEnvelope(record.body, s.parseOptions);
    const job = { message: new RecordMessage(queue, record, log), envelope, payload: envelope.payload, log };
    const claimedAt = s.now();
    const claimed = await claim(s, job, s.leaseMs, claimedAt);
    if (!claimed?.claimed) throw new Error('expected a claim');
    const attempt = startAttempt(s, job, reserve, claimed, {
      leaseMs: s.leaseMs,
      claimedAt,
      deadline: undefined,
    });
    const action = await settleFailure(s, attempt, conflict(), deadLetterer);
    return { record, action, attempts: attempt.lease.attempts };
  };
  return { doc, store, queue, metrics, conflictOnce };
}

describe('Function: settleFailure, an optimistic conflict', () => {
  it('takes the attempt back on the last attempt, counts the conflict, and waits the conflict backoff', async () => {
    // Prepare: two real failures used attempts 1 and 2 of 3.
    const w = world();
    w.queue.send(body);
    for (let i = 0; i < 2; i++) {
      const [record] = w.queue.receive(1);
      if (!record) throw new Error('no message');
      const claimed = await w.store.claim({
        dedupKey: KEY,
        owner: 'w-a',
        messageId: record.messageId,
        type: TYPE,
        createdAt: new Date().toISOString(),
        leaseMs: 3000,
        now: Date.now(),
      });
      if (!claimed.claimed) throw new Error('expected a claim');
      await w.store.release(claimed.lease, Date.now(), { message: 'boom', errorClass: 'Error' });
      await w.queue.changeVisibility(record.receiptHandle, 0);
      await vi.advanceTimersByTimeAsync(1);
    }
    const at = Date.now();

    // Act: attempt 3, the last, ends in a conflict.
    const { record, action, attempts } = await w.conflictOnce();

    // Assess: no attempt used, the conflict counted on the item, the message hidden for 2 s.
    expect(attempts).toBe(3);
    expect(action).toBe('retry');
    expect(await w.store.get(KEY)).toMatchObject({
      status: JobStatus.RetryWait,
      attempts: 2,
      conflicts: 1,
      leaseUntil: at + 2000,
      lastErrorClass: 'OptimisticConflictError',
    });
    expect(w.queue.messages().find((m) => m.messageId === record.messageId)?.visibleAt).toBe(at + 2000);
    expect(w.queue.deadLetters).toEqual([]);
    expect(w.metrics.get(MetricName.ConflictRetries)).toBe(1);
    expect(w.metrics.get(MetricName.ConflictRetries, { jobType: TYPE })).toBe(1);
    expect(w.metrics.get(MetricName.JobRetried)).toBe(0);
  });

  it('dead-letters max-conflicts once the conflicts are used up, with the attempts untouched', async () => {
    // Prepare
    const w = world();
    w.queue.send(body);
    const backoffs: number[] = [];
    for (let i = 0; i < MAX_CONFLICTS; i++) {
      const at = Date.now();
      expect((await w.conflictOnce()).action).toBe('retry');
      backoffs.push(((await w.store.get(KEY))?.leaseUntil ?? 0) - at);
      await vi.advanceTimersByTimeAsync(10_000);
    }

    // Act
    const last = await w.conflictOnce();

    // Assess: the backoff grew with the conflicts; the third conflict ends the job, naming the bound.
    expect(backoffs).toEqual([2000, 4000]);
    expect(last.action).toBe('dead-lettered');
    expect(await w.store.get(KEY)).toMatchObject({ status: JobStatus.Dead, attempts: 1, conflicts: 2 });
    expect(w.queue.deadLetters).toHaveLength(1);
    expect(w.queue.deadLetters[0]?.reason).toMatchObject({
      reason: 'max-conflicts',
      errorClass: 'OptimisticConflictError',
    });
  });

  it(`re-sends the message from receive ${RESEND_AT_RECEIVES} on, so the queue's redrive never counts conflicts`, async () => {
    // Prepare: the message has been received RESEND_AT_RECEIVES - 1 times.
    const w = world();
    w.queue.send(body);
    for (let i = 1; i < RESEND_AT_RECEIVES; i++) {
      const [record] = w.queue.receive(1);
      if (!record) throw new Error('no message');
      await w.queue.changeVisibility(record.receiptHandle, 0);
    }

    // Act
    const { record, action } = await w.conflictOnce();

    // Assess: the original is gone; one new message of the same job names it as its origin.
    expect(action).toBe('retry');
    const left = w.queue.messages();
    expect(left).toHaveLength(1);
    expect(left[0]?.messageId).not.toBe(record.messageId);
    expect(left[0]?.attributes?.[ORIGIN_ATTRIBUTE]?.stringValue).toBe(record.messageId);
    expect(await w.store.get(KEY)).toMatchObject({ status: JobStatus.RetryWait, attempts: 0, conflicts: 1 });
  });
});
