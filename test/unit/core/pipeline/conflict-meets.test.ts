import { Logger } from '@aws-lambda-powertools/logger';
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
import { RecordMessage } from '../../../../shared/core/pipeline/record-message.ts';
import { settleFailure } from '../../../../shared/core/pipeline/release.ts';
import { resolveSettings } from '../../../../shared/core/pipeline/settings.ts';
import { OptimisticConflictError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// Where the conflict give-back (issue 31 item 9, edge E8c) meets the features already there: a release
// whose answer was lost, a cancel racing the release, and an operator's redrive of a job that died
// `max-conflicts`. settleFailure on the in-memory store and queue, under fake timers, as in
// conflict-release.test.ts.

const KEY = 'order-1';
const TYPE = 'stock.reserve';
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
  const logger = new Logger({ logLevel: 'SILENT' });
  const s = resolveSettings({
    store,
    queue,
    registry: JobRegistry.of([reserve]),
    worker: 'w-a',
    logger,
    metrics,
    leaseMs: 3000,
    maxAttempts: 3,
    maxConflicts: MAX_CONFLICTS,
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

  /** Receives the visible message and claims it; `end` settles the attempt with a conflict. */
  const claimOne = async () => {
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
    return { record, attempt, end: () => settleFailure(s, attempt, conflict(), deadLetterer) };
  };
  return { doc, store, queue, metrics, claimOne };
}

describe('The conflict give-back where it meets other features', () => {
  it('takes the attempt back once when the release landed and only its answer was lost', async () => {
    // Prepare: the first release is applied and its answer lost; the retry is refused by the fence.
    const w = world();
    w.queue.send(body);
    const one = await w.claimOne();
    w.doc.faults.failNext('release', undefined, { when: 'after' });

    // Act: the retry waits a short pause first (fake timers).
    const ending = one.end();
    await vi.advanceTimersByTimeAsync(1000);
    const action = await ending;

    // Assess: one give-back, counted once, the attempt taken back once (not to -1).
    expect(w.doc.faults.injected.get('release')).toBe(1);
    expect(action).toBe('retry');
    expect(one.attempt.lease.attempts).toBe(1);
    expect(await w.store.get(KEY)).toMatchObject({ status: JobStatus.RetryWait, attempts: 0, conflicts: 1 });
    expect(w.metrics.get(MetricName.ConflictRetries)).toBe(1);
    expect(w.metrics.get(MetricName.LeaseLost)).toBe(0);
  });

  it('stops a job cancelled while its conflict was being given back: no retry, no attempt change', async () => {
    // Prepare: the job conflicted; an operator cancels it before the release.
    const w = world();
    w.queue.send(body);
    const one = await w.claimOne();
    await w.store.cancel(KEY, { by: 'ops', reason: 'test', now: Date.now() });

    // Act
    const action = await one.end();

    // Assess: the cancel stands, the message is gone, nothing counted as a conflict's give-back.
    expect(action).toBe('cancelled');
    const item = await w.store.get(KEY);
    expect(item?.status).toBe(JobStatus.Cancelled);
    expect(item?.conflicts).toBeUndefined();
    expect(w.queue.messages()).toEqual([]);
    expect(w.metrics.get(MetricName.ConflictRetries)).toBe(0);
  });

  it('gives a job redriven after max-conflicts its whole conflict budget again', async () => {
    // Prepare: the job used its conflicts and died max-conflicts.
    const w = world();
    w.queue.send(body);
    for (let i = 0; i <= MAX_CONFLICTS; i++) {
      await (await w.claimOne()).end();
      await vi.advanceTimersByTimeAsync(60_000);
    }
    expect(await w.store.get(KEY)).toMatchObject({ status: JobStatus.Dead, deadReason: 'max-conflicts' });

    // Act: an operator's redrive resets the item and sends the letter's body again.
    expect(await w.store.resetForRedrive(KEY, Date.now())).toBe(true);
    w.queue.send(body);
    const again = await w.claimOne();
    const action = await again.end();

    // Assess: the redriven job's first conflict is a give-back, its count starting from zero.
    expect(again.attempt.lease.conflicts).toBeUndefined();
    expect(action).toBe('retry');
    expect(await w.store.get(KEY)).toMatchObject({ status: JobStatus.RetryWait, attempts: 0, conflicts: 1 });
  });
});
