import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope, parseEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import type { BackoffPolicy } from '../../../../shared/core/decisions/backoff.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { JobLog } from '../../../../shared/core/observe/job-log.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import type { Attempt, Job } from '../../../../shared/core/pipeline/attempt.ts';
import { claim, startAttempt } from '../../../../shared/core/pipeline/claim.ts';
import { commit } from '../../../../shared/core/pipeline/commit.ts';
import { CompletedCache } from '../../../../shared/core/pipeline/completed-cache.ts';
import { DeadLetterer } from '../../../../shared/core/pipeline/dead-letterer.ts';
import type { RecordAction } from '../../../../shared/core/pipeline/outcome.ts';
import { RecordMessage } from '../../../../shared/core/pipeline/record-message.ts';
import { settleFailure } from '../../../../shared/core/pipeline/release.ts';
import { resolveSettings, type Settings } from '../../../../shared/core/pipeline/settings.ts';
import {
  DeadlineError,
  InvalidEnvelopeError,
  LeaseLostError,
  LeaseRanOutError,
  PermanentJobError,
  StoreUnavailableError,
  TransientJobError,
} from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { expectOnlyLeaseLostNoted } from '../../../support/history.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// settleFailure on the in-memory job store and queue under fake timers: what a failed attempt leads to
// (decideFailure), carried out. Protocol edges E7 (release with a backoff), E8 (the same with the attempt
// refunded: a store outage, or a lease that ran out), E9 through the DeadLetterer, and the two answers
// that leave everything alone (the lease is lost; the job was completed after all). Every attempt is a
// real claim (claim/startAttempt) under Settings from resolveSettings, and every test reads the state
// afterwards: the job item in the store, M (the message) in the queue, the DLQ, the metrics.

const LEASE_MS = 3000;
const KEY = 'job-1';
const TYPE = 'test.work';
const MAX_ATTEMPTS = 3;
/** What a receive hides M for (s), so a test can tell a visibility that nobody changed. */
const VISIBILITY_S = 30;
/**
 * Backoff before retry n: full jitter over min(900, 10 × 2^(n−1)) s. With the default random of 0.75 the
 * delays are 8 s (round(7.5)) after attempt 1, 15 s after attempt 2 and 30 s after attempt 3.
 */
const BACKOFF: BackoffPolicy = { baseSeconds: 10, capSeconds: 900 };
const DEFAULT_RANDOM = 0.75;

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const work = defineJob({
  type: TYPE,
  payload: z.object({ n: z.number() }),
  run: async () => undefined,
});

const body = JSON.stringify(makeEnvelope({ id: 'e-1', type: TYPE, dedupKey: KEY, payload: { n: 1 } }));

/** One worker's claimed attempt, and settleFailure as the pipeline calls it for that attempt. */
interface Held {
  readonly s: Settings;
  readonly attempt: Attempt;
  readonly record: SQSRecord;
  readonly settle: (error: unknown) => Promise<RecordAction>;
}

function world(options: { maxAttempts?: number; random?: number } = {}) {
  const { doc, store } = memoryStores();
  const queue = new InMemoryQueue({ visibilitySeconds: VISIBILITY_S });
  const metrics = new InMemoryMetrics();
  const cache = new CompletedCache();
  const registry = JobRegistry.of([work]);
  const logger = new Logger({ logLevel: 'SILENT' });
  const random = vi.fn(() => options.random ?? DEFAULT_RANDOM);
  const settings = (worker: string): Settings =>
    resolveSettings({
      store,
      queue,
      registry,
      worker,
      logger,
      metrics,
      cache,
      leaseMs: LEASE_MS,
      maxAttempts: options.maxAttempts ?? MAX_ATTEMPTS,
      backoff: BACKOFF,
      random,
      now: () => Date.now(),
    });

  /** The next visible message, as a receive hands it over. */
  const receive = (): SQSRecord => {
    const [record] = queue.receive(1);
    if (!record) throw new Error('no visible message');
    return record;
  };

  /** `worker` claims the job of `record` as the processor does (throws when refused). */
  const claimAs = async (record: SQSRecord, worker: string): Promise<Held> => {
    const s = settings(worker);
    const log = new JobLog(logger, { dedupKey: KEY, worker });
    const envelope = parseEnvelope(record.body, s.parseOptions);
    const job: Job = {
      message: new RecordMessage(queue, record, log),
      envelope,
      payload: envelope.payload,
      log,
    };
    const definition = registry.get(envelope.type);
    if (!definition) throw new Error(`unregistered ${envelope.type}`);
    const claimedAt = s.now();
    const claimed = await claim(s, job, s.leaseMs, claimedAt);
    if (!claimed?.claimed) throw new Error(`expected ${worker} to claim ${KEY}`);
    const attempt = startAttempt(s, job, definition, claimed, {
      leaseMs: s.leaseMs,
      claimedAt,
      deadline: undefined,
    });
    const deadLetterer = new DeadLetterer({
      store,
      queue,
      metrics,
      worker,
      backoffSeconds: s.backoffSeconds,
      callBudgetMs: s.leaseMs,
    });
    return { s, attempt, record, settle: (error) => settleFailure(s, attempt, error, deadLetterer) };
  };

  /** M as the queue holds it now (undefined: deleted). */
  const original = (record: SQSRecord) => queue.messages().find((m) => m.messageId === record.messageId);
  const item = () => store.get(KEY);

  return { doc, store, queue, metrics, cache, random, receive, claimAs, original, item };
}
type World = ReturnType<typeof world>;

/** Sends M and claims it as `worker` until the claim is attempt `attempts` (earlier ones released at once). */
async function claimAttempt(w: World, attempts: number, worker = 'w-a'): Promise<Held> {
  w.queue.send(body);
  let held = await w.claimAs(w.receive(), worker);
  while (held.attempt.lease.attempts < attempts) {
    await w.store.release(held.attempt.lease, Date.now(), {
      message: `TransientJobError: try ${held.attempt.lease.attempts} failed`,
      errorClass: 'TransientJobError',
    });
    await vi.advanceTimersByTimeAsync(VISIBILITY_S * 1000);
    held = await w.claimAs(w.receive(), worker);
  }
  return held;
}

/** w-a claims M; its lease runs out unrenewed and w-b takes the job over with a duplicate copy of M. */
async function takenOver(w: World): Promise<{ mine: Held; theirs: Held }> {
  w.queue.send(body);
  w.queue.send(body);
  const [mineRecord, copyRecord] = w.queue.receive(2);
  if (!mineRecord || !copyRecord) throw new Error('expected two records');
  const mine = await w.claimAs(mineRecord, 'w-a');
  await vi.advanceTimersByTimeAsync(LEASE_MS + 1);
  const theirs = await w.claimAs(copyRecord, 'w-b');
  return { mine, theirs };
}

/** Commits `held`'s lease with its answer lost (the write applied): the job is COMPLETED under this lease. */
async function commitWithLostAnswer(w: World, held: Held): Promise<void> {
  w.doc.faults.failNext('complete', undefined, { when: 'after' });
  await expect(w.store.complete(held.attempt.lease, 'ok')).rejects.toBeInstanceOf(StoreUnavailableError);
  afterAWrite();
}

/**
 * The clock moves on past a write (the fake clock stands still): the job store tells its own retried write
 * from another by its millisecond (dynamodb-refusals.ts isOwnWrite), and on AWS a round trip separates them.
 */
function afterAWrite(): void {
  vi.setSystemTime(Date.now() + 1);
}

/** Records the store's fenced calls from now on (renew, release, markDead, complete), by method name. */
function storeWrites(w: World): () => string[] {
  const spies = (['renew', 'release', 'markDead', 'complete'] as const).map((name) => ({
    name,
    spy: vi.spyOn(w.store, name),
  }));
  return () => spies.flatMap(({ name, spy }) => spy.mock.calls.map(() => name));
}

const failure = () => new TransientJobError('downstream refused the transfer');
const outage = () => new StoreUnavailableError('checkpoint', new Error('ThrottlingException: slow down'));

describe('Function: settleFailure', () => {
  describe('a retryable failure below maxAttempts (E7)', () => {
    it('releases the item to RETRY_WAIT until the jittered backoff, keeps attempts and checkpoint, and hides M as long: retry', async () => {
      // Prepare: attempt 2 of 3 has saved a checkpoint, then fails 500 ms later.
      const w = world();
      const held = await claimAttempt(w, 2);
      await w.store.checkpoint(held.attempt.lease, {
        step: 'debit',
        done: ['debit'],
        data: { debited: 5 },
        at: Date.now(),
      });
      await vi.advanceTimersByTimeAsync(500);
      const before = await w.item();
      const at = Date.now();

      // Act
      const action = await held.settle(failure());

      // Assess: backoff after attempt 2 = round(min(900, 10 × 2) × 0.75) = 15 s.
      expect(action).toBe('retry');
      const after = await w.item();
      expect(after).toMatchObject({
        status: JobStatus.RetryWait,
        leaseUntil: at + 15_000,
        attempts: 2,
        token: before?.token,
        version: (before?.version ?? 0) + 1,
        lastError: 'TransientJobError: downstream refused the transfer',
        lastErrorClass: 'TransientJobError',
        checkpoint: { step: 'debit', done: ['debit'], data: { debited: 5 }, at: before?.checkpoint?.at },
      });
      expect(after?.owner).toBeUndefined();
      expect(w.original(held.record)?.visibleAt).toBe(at + 15_000);
      expect(w.random).toHaveBeenCalledTimes(1);
      expect(w.queue.deadLetters).toEqual([]);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(1);
      expect(w.metrics.get(MetricName.JobRetried, { jobType: TYPE })).toBe(1);
      expect(w.metrics.get(MetricName.StoreUnavailable)).toBe(0);
      expect(w.metrics.get(MetricName.LeaseLost)).toBe(0);
      expect(w.metrics.get(MetricName.JobSucceeded)).toBe(0);
    });

    it('brings M back when the retry is due, and its claim resumes the job from the checkpoint (E3)', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);
      await w.store.checkpoint(held.attempt.lease, { step: 'debit', done: ['debit'], at: Date.now() });
      const at = Date.now();
      await held.settle(failure());

      // Act 1: just before the backoff (8 s after attempt 1) ends.
      await vi.advanceTimersByTimeAsync(8_000 - 1);

      // Assess 1: M is still hidden.
      expect(w.queue.receive(1)).toEqual([]);

      // Act 2: the backoff is over; M returns and is claimed again.
      await vi.advanceTimersByTimeAsync(2);
      const again = await w.claimAs(w.receive(), 'w-b');

      // Assess 2: the same message, a retry claim with the next attempt and the kept checkpoint.
      expect(Date.now()).toBe(at + 8_001);
      expect(again.record.messageId).toBe(held.record.messageId);
      expect(again.attempt.lease).toMatchObject({ attempts: 2, checkpoint: { step: 'debit' } });
      expect(await w.item()).toMatchObject({ status: JobStatus.InProgress, owner: 'w-b', attempts: 2 });
    });

    it.each([
      [0.2, 2],
      [0.5, 5],
      [0.99, 10],
      [0, 0],
    ])(
      'draws the delay with full jitter from the injected random (%s → %i s after attempt 1)',
      async (random, seconds) => {
        // Prepare
        const w = world({ random });
        const held = await claimAttempt(w, 1);
        const at = Date.now();

        // Act
        const action = await held.settle(failure());

        // Assess: round(min(900, 10) × random) seconds, in the item and in M's visibility alike.
        expect(action).toBe('retry');
        expect((await w.item())?.leaseUntil).toBe(at + seconds * 1000);
        expect(w.original(held.record)?.visibleAt).toBe(at + seconds * 1000);
      },
    );

    it('stores a thrown value that is not an Error by its type', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);

      // Act
      const action = await held.settle('boom');

      // Assess
      expect(action).toBe('retry');
      expect(await w.item()).toMatchObject({
        status: JobStatus.RetryWait,
        attempts: 1,
        lastError: 'boom',
        lastErrorClass: 'string',
      });
    });

    it('still releases the item when M’s give-back fails: M shows again when its receive visibility ends', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);
      const visibleBefore = w.original(held.record)?.visibleAt;
      const at = Date.now();
      w.queue.faults.failNext('change-visibility');

      // Act
      const action = await held.settle(failure());

      // Assess
      expect(action).toBe('retry');
      expect(await w.item()).toMatchObject({ status: JobStatus.RetryWait, leaseUntil: at + 8_000 });
      expect(w.original(held.record)?.visibleAt).toBe(visibleBefore);
      expect(w.queue.faults.injected.get('change-visibility')).toBe(1);
    });
  });

  describe('a cause outside the job (E8: the attempt refunded)', () => {
    it('releases after a store outage with attempts − 1, and counts StoreUnavailable: retry', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 2);
      const at = Date.now();

      // Act
      const action = await held.settle(outage());

      // Assess: the backoff is still the one after attempt 2 (15 s); only the count is refunded.
      expect(action).toBe('retry');
      const after = await w.item();
      expect(after).toMatchObject({
        status: JobStatus.RetryWait,
        leaseUntil: at + 15_000,
        attempts: 1,
        lastErrorClass: 'StoreUnavailableError',
        lastError:
          'StoreUnavailableError: store unavailable during checkpoint: Error: ThrottlingException: slow down',
      });
      expect(after?.owner).toBeUndefined();
      expect(w.original(held.record)?.visibleAt).toBe(at + 15_000);
      expect(w.metrics.get(MetricName.StoreUnavailable)).toBe(1);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(1);
    });

    it('never dead-letters for an outage, even on the last attempt', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, MAX_ATTEMPTS);
      const at = Date.now();

      // Act
      const action = await held.settle(outage());

      // Assess
      expect(action).toBe('retry');
      expect(await w.item()).toMatchObject({
        status: JobStatus.RetryWait,
        attempts: MAX_ATTEMPTS - 1,
        leaseUntil: at + 30_000,
      });
      expect(w.queue.deadLetters).toEqual([]);
      expect(w.original(held.record)?.visibleAt).toBe(at + 30_000);
      expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(0);
    });

    it('releases a lease that ran out with nobody claiming the job meanwhile, refunded: lease-ran-out', async () => {
      // Prepare: no renewal got through and the lease ended; M is still hidden (30 s), so nobody claimed.
      const w = world();
      const held = await claimAttempt(w, 1);
      await vi.advanceTimersByTimeAsync(LEASE_MS + 500);
      const at = Date.now();
      const ranOut = new LeaseRanOutError(
        KEY,
        held.attempt.lease.token,
        'no renewal got through in time',
        undefined,
        {
          renewalFailed: true,
        },
      );

      // Act
      const action = await held.settle(ranOut);

      // Assess: the fence (owner, token, IN_PROGRESS) still held, so the release applied.
      expect(action).toBe('lease-ran-out');
      const after = await w.item();
      expect(after).toMatchObject({
        status: JobStatus.RetryWait,
        leaseUntil: at + 8_000,
        attempts: 0,
        lastErrorClass: 'LeaseRanOutError',
      });
      expect(after?.owner).toBeUndefined();
      expect(w.original(held.record)?.visibleAt).toBe(at + 8_000);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(1);
      expect(w.metrics.get(MetricName.StoreUnavailable)).toBe(1);
      expect(w.metrics.get(MetricName.LeaseLost)).toBe(0);
    });

    it('refunds a run-out on the last attempt instead of dead-lettering it', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, MAX_ATTEMPTS);
      await vi.advanceTimersByTimeAsync(LEASE_MS + 1);

      // Act
      const action = await held.settle(
        new LeaseRanOutError(KEY, held.attempt.lease.token, 'ran out', undefined, { renewalFailed: true }),
      );

      // Assess
      expect(action).toBe('lease-ran-out');
      expect(await w.item()).toMatchObject({
        status: JobStatus.RetryWait,
        attempts: MAX_ATTEMPTS - 1,
        refunds: 1,
      });
      expect(w.queue.deadLetters).toEqual([]);
    });

    it('leaves a run-out lease to the worker that took the job over meanwhile: lease-lost, no refund, M untouched', async () => {
      // Prepare
      const w = world();
      const { mine, theirs } = await takenOver(w);
      const before = await w.item();
      const mBefore = w.original(mine.record);

      // Act
      const action = await mine.settle(
        new LeaseRanOutError(KEY, mine.attempt.lease.token, 'ran out', undefined, { renewalFailed: true }),
      );

      // Assess: the release was refused by the fence; the new owner's item and attempt count are intact.
      // The lease was lost (docs/protocol.md, "Metrics": LeaseLost), and nothing was released for a retry.
      expect(action).toBe('lease-lost');
      expect(w.metrics.get(MetricName.LeaseLost)).toBe(1);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(0);
      expectOnlyLeaseLostNoted(await w.item(), before, 'w-a');
      expect(before).toMatchObject({
        status: JobStatus.InProgress,
        owner: 'w-b',
        token: theirs.attempt.lease.token,
        attempts: 2,
      });
      expect(w.original(mine.record)).toEqual(mBefore);
    });

    // Defect 4 (issue 18): a job that blocked its own event loop past its lease (no renewal was sent in
    // time) was refunded on every run-out: attempts 0 after each, RETRY_WAIT forever, never dead-lettered.
    it('uses up the attempt of a run-out with no failed renewal (the job starved its heartbeat), and dead-letters the last', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);
      await vi.advanceTimersByTimeAsync(LEASE_MS + 1);

      // Act 1
      const action = await held.settle(
        new LeaseRanOutError(KEY, held.attempt.lease.token, 'no renewal sent'),
      );

      // Assess 1: released with the attempt counted; not an outage.
      expect(action).toBe('lease-ran-out');
      expect(await w.item()).toMatchObject({ status: JobStatus.RetryWait, attempts: 1 });
      expect((await w.item())?.refunds).toBeUndefined();
      expect(w.metrics.get(MetricName.StoreUnavailable)).toBe(0);

      // Act 2: the same on the last attempt (of another job world).
      const v = world();
      const last = await claimAttempt(v, MAX_ATTEMPTS);
      await vi.advanceTimersByTimeAsync(LEASE_MS + 1);
      const lastAction = await last.settle(
        new LeaseRanOutError(KEY, last.attempt.lease.token, 'no renewal sent'),
      );

      // Assess 2: dead-lettered, with a letter naming the run-out.
      expect(lastAction).toBe('dead-lettered');
      expect(await v.item()).toMatchObject({
        status: JobStatus.Dead,
        attempts: MAX_ATTEMPTS,
        lastErrorClass: 'LeaseRanOutError',
      });
      expect(v.queue.deadLetters).toHaveLength(1);
    });
  });

  describe('the refund budget (DEFAULTS.maxRefunds)', () => {
    it('records each refund on the item, and counts the attempt once the item has used its refunds up', async () => {
      // Prepare: the last attempt meets an outage again and again (the default budget is 3 refunds).
      const w = world();
      let held = await claimAttempt(w, MAX_ATTEMPTS);
      const seen: { attempts?: number; refunds?: number; status?: string }[] = [];

      // Act: settle an outage, bring M back, claim again; five times or until dead-lettered.
      for (let i = 0; i < 5; i++) {
        const action = await held.settle(outage());
        const item = await w.item();
        seen.push({ attempts: item?.attempts, refunds: item?.refunds, status: item?.status });
        if (action === 'dead-lettered') break;
        await vi.advanceTimersByTimeAsync(60_000);
        held = await w.claimAs(w.receive(), 'w-a');
      }

      // Assess: three refunds, then the outage's attempt counts and the job is dead-lettered (bounded).
      expect(seen).toEqual([
        { attempts: MAX_ATTEMPTS - 1, refunds: 1, status: JobStatus.RetryWait },
        { attempts: MAX_ATTEMPTS - 1, refunds: 2, status: JobStatus.RetryWait },
        { attempts: MAX_ATTEMPTS - 1, refunds: 3, status: JobStatus.RetryWait },
        { attempts: MAX_ATTEMPTS, refunds: 3, status: JobStatus.Dead },
      ]);
      expect(w.queue.deadLetters).toHaveLength(1);
    });
  });

  describe('a deadline abort', () => {
    it('releases with no delay and shows M again at once, using up the attempt (docs: known gap 10): deadline', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);
      await vi.advanceTimersByTimeAsync(1000);
      const at = Date.now();

      // Act
      const action = await held.settle(new DeadlineError('the invocation deadline is near'));

      // Assess
      expect(action).toBe('deadline');
      const after = await w.item();
      expect(after).toMatchObject({
        status: JobStatus.RetryWait,
        leaseUntil: at,
        attempts: 1,
        lastErrorClass: 'DeadlineError',
      });
      expect(after?.owner).toBeUndefined();
      expect(w.original(held.record)?.visibleAt).toBe(at);
      expect(w.queue.receive(1).map((r) => r.messageId)).toEqual([held.record.messageId]);
      expect(w.random).not.toHaveBeenCalled();
      expect(w.metrics.get(MetricName.JobRetried)).toBe(1);
      expect(w.metrics.get(MetricName.StoreUnavailable)).toBe(0);
    });

    it('dead-letters a deadline abort on the last attempt (docs: known gap 10)', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, MAX_ATTEMPTS);

      // Act
      const action = await held.settle(new DeadlineError('the invocation deadline is near'));

      // Assess
      expect(action).toBe('dead-lettered');
      expect(w.queue.deadLetters.map((l) => [l.reason.reason, l.reason.errorClass])).toEqual([
        ['max-attempts', 'DeadlineError'],
      ]);
      expect((await w.item())?.status).toBe(JobStatus.Dead);
    });
  });

  describe('dead-lettering (E9, through the DeadLetterer)', () => {
    it('dead-letters a permanent error at once: the letter says why, the item is DEAD, M is deleted', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);

      // Act
      const action = await held.settle(new PermanentJobError('account closed'));

      // Assess
      expect(action).toBe('dead-lettered');
      expect(w.queue.deadLetters).toEqual([
        {
          body,
          reason: {
            reason: 'permanent-error',
            errorClass: 'PermanentJobError',
            errorMessage: 'PermanentJobError: account closed',
            attempts: 1,
            dedupKey: KEY,
            worker: 'w-a',
            messageId: held.record.messageId,
            type: TYPE,
          },
        },
      ]);
      const after = await w.item();
      expect(after).toMatchObject({
        status: JobStatus.Dead,
        leaseUntil: 0,
        attempts: 1,
        lastError: 'PermanentJobError: account closed',
        lastErrorClass: 'PermanentJobError',
      });
      expect(after?.owner).toBeUndefined();
      expect(w.original(held.record)).toBeUndefined();
      expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(1);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(0);
      expect(w.random).not.toHaveBeenCalled();
    });

    it('names a payload the schema refused as invalid-bad-payload', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);

      // Act
      const action = await held.settle(new InvalidEnvelopeError('bad-payload', 'n must be a number'));

      // Assess
      expect(action).toBe('dead-lettered');
      expect(w.queue.deadLetters.map((l) => l.reason)).toEqual([
        expect.objectContaining({ reason: 'invalid-bad-payload', errorClass: 'InvalidEnvelopeError' }),
      ]);
      expect((await w.item())?.status).toBe(JobStatus.Dead);
      expect(w.queue.size).toBe(0);
    });

    it('dead-letters a retryable failure of the last attempt as max-attempts, with the attempts it used', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, MAX_ATTEMPTS);

      // Act
      const action = await held.settle(failure());

      // Assess
      expect(action).toBe('dead-lettered');
      expect(w.queue.deadLetters.map((l) => l.reason)).toEqual([
        expect.objectContaining({
          reason: 'max-attempts',
          errorClass: 'TransientJobError',
          errorMessage: 'TransientJobError: downstream refused the transfer',
          attempts: MAX_ATTEMPTS,
        }),
      ]);
      expect(await w.item()).toMatchObject({
        status: JobStatus.Dead,
        attempts: MAX_ATTEMPTS,
        lastErrorClass: 'TransientJobError',
      });
      expect(w.queue.size).toBe(0);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(0);
    });

    it('returns the DeadLetterer’s own answer when the letter could not be sent: retry, item unchanged, M kept', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);
      w.queue.faults.failNext('send-to-dead-letter');
      const at = Date.now();

      // Act
      const action = await held.settle(new PermanentJobError('account closed'));

      // Assess: no letter, the item still IN_PROGRESS under w-a, M hidden for the backoff of attempt 1.
      expect(action).toBe('retry');
      expect(w.queue.deadLetters).toEqual([]);
      expect(await w.item()).toMatchObject({ status: JobStatus.InProgress, owner: 'w-a', attempts: 1 });
      expect(w.original(held.record)?.visibleAt).toBe(at + 8_000);
      expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(0);
    });

    it('sends no letter for a permanent error of a worker whose job was taken over: lease-lost', async () => {
      // Prepare
      const w = world();
      const { mine } = await takenOver(w);
      const before = await w.item();

      // Act
      const action = await mine.settle(new PermanentJobError('account closed'));

      // Assess
      expect(action).toBe('lease-lost');
      expect(w.queue.deadLetters).toEqual([]);
      expectOnlyLeaseLostNoted(await w.item(), before, 'w-a');
      expect(w.metrics.get(MetricName.LeaseLost)).toBe(1);
    });
  });

  describe('a lost lease', () => {
    it('touches nothing when the lease was lost (another worker took the job): lease-lost, LeaseLost counted', async () => {
      // Prepare: w-a learns of the loss from its renewal, the way the heartbeat does.
      const w = world();
      const { mine, theirs } = await takenOver(w);
      const lost = await mine.attempt.renewer.renew().catch((error: unknown) => error);
      expect(lost).toBeInstanceOf(LeaseLostError);
      const before = await w.item();
      const mineBefore = w.original(mine.record);
      const theirsBefore = w.original(theirs.record);
      const writes = storeWrites(w);

      // Act
      const action = await mine.settle(lost);
      await vi.advanceTimersByTimeAsync(0);

      // Assess: no store call was even tried; the new owner's item and both messages are as they were.
      expect(action).toBe('lease-lost');
      expect(writes()).toEqual([]);
      expectOnlyLeaseLostNoted(await w.item(), before, 'w-a');
      expect(before).toMatchObject({ owner: 'w-b', status: JobStatus.InProgress });
      expect(w.original(mine.record)).toEqual(mineBefore);
      expect(w.original(theirs.record)).toEqual(theirsBefore);
      expect(w.queue.deadLetters).toEqual([]);
      expect(w.metrics.get(MetricName.LeaseLost)).toBe(1);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(0);
      expect(w.metrics.get(MetricName.StoreUnavailable)).toBe(0);
    });

    it('leaves the job to its new owner even on the last attempt: no letter', async () => {
      // Prepare: one attempt allowed, and it lost its lease.
      const w = world({ maxAttempts: 1 });
      const { mine } = await takenOver(w);
      const before = await w.item();
      const writes = storeWrites(w);

      // Act
      const action = await mine.settle(new LeaseLostError(KEY, mine.attempt.lease.token, 'token changed'));

      // Assess: not even the dead-letterer's fence was tried.
      expect(action).toBe('lease-lost');
      expect(writes()).toEqual([]);
      expect(w.queue.deadLetters).toEqual([]);
      expectOnlyLeaseLostNoted(await w.item(), before, 'w-a');
    });

    it('takes a refusal that shows the job COMPLETED by this very lease as done: completed, nothing written', async () => {
      // Prepare: the commit applied but its answer was lost; the next renewal is refused by the COMPLETED item.
      const w = world();
      const held = await claimAttempt(w, 1);
      await commitWithLostAnswer(w, held);
      const refused = await held.attempt.renewer.renew().catch((error: unknown) => error);
      expect(refused).toMatchObject({ name: 'LeaseLostError', completedByThisLease: true });
      const before = await w.item();
      const mBefore = w.original(held.record);

      // Act
      const action = await held.settle(refused);

      // Assess: done (the batch deletes M); the item is the COMPLETED one, M is not given back.
      expect(action).toBe('completed');
      expect(await w.item()).toEqual(before);
      expect(before).toMatchObject({ status: JobStatus.Completed, owner: 'w-a' });
      expect(w.original(held.record)).toEqual(mBefore);
      expect(w.cache.has(KEY)).toBe(true);
      expect(w.metrics.get(MetricName.JobSucceeded)).toBe(1);
      expect(w.metrics.get(MetricName.JobSucceeded, { jobType: TYPE })).toBe(1);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(0);
      expect(w.metrics.get(MetricName.LeaseLost)).toBe(0);
    });
  });

  describe('the release itself fails or is refused', () => {
    it('leaves M untouched when the fence refuses the release (another worker took the job over): lease-lost', async () => {
      // Prepare
      const w = world();
      const { mine, theirs } = await takenOver(w);
      const before = await w.item();
      const mineBefore = w.original(mine.record);

      // Act
      const action = await mine.settle(failure());

      // Assess: the new owner's item (its attempt not refunded, no lastError) and M are as they were.
      expect(action).toBe('lease-lost');
      expectOnlyLeaseLostNoted(await w.item(), before, 'w-a');
      expect(before).toMatchObject({ owner: 'w-b', token: theirs.attempt.lease.token, attempts: 2 });
      expect(before?.lastError).toBeUndefined();
      expect(w.original(mine.record)).toEqual(mineBefore);
      expect(w.queue.deadLetters).toEqual([]);
    });

    // docs/protocol.md, "Metrics": JobRetried is counted when "an attempt was released for a retry", so a
    // release the fence refuses (the job is another worker's, action 'lease-lost') is no retry (it was
    // counted before the release was tried until issue 18).
    it('counts no JobRetried for a release the fence refused (docs: JobRetried = an attempt was released)', async () => {
      // Prepare
      const w = world();
      const { mine } = await takenOver(w);

      // Act
      const action = await mine.settle(failure());

      // Assess
      expect(action).toBe('lease-lost');
      expect(w.metrics.get(MetricName.JobRetried)).toBe(0);
    });

    it('gives M back with the backoff when the release fails with an outage; the lease expires instead and M takes the job over (E2)', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);
      w.doc.faults.failNext('release');
      const before = await w.item();
      const at = Date.now();

      // Act 1
      const action = await held.settle(failure());

      // Assess 1: nothing written (still IN_PROGRESS under w-a, attempt not refunded, no lastError);
      // M hidden for the backoff of attempt 1 (8 s), past the lease's end.
      expect(action).toBe('retry');
      expect(await w.item()).toEqual(before);
      expect(before).toMatchObject({ status: JobStatus.InProgress, owner: 'w-a', attempts: 1 });
      expect(w.original(held.record)?.visibleAt).toBe(at + 8_000);
      expect(w.doc.faults.injected.get('release')).toBe(1);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(1);

      // Act 2: M comes back after the backoff, when the lease has long ended.
      await vi.advanceTimersByTimeAsync(8_000);
      const again = await w.claimAs(w.receive(), 'w-b');

      // Assess 2: a takeover of the expired lease, and it counts an attempt.
      expect(again.record.messageId).toBe(held.record.messageId);
      expect(again.attempt.lease.attempts).toBe(2);
      expect(w.metrics.get(MetricName.LeaseExpired)).toBe(1);
    });

    it('abandons a release that hangs after one lease and gives M back then', async () => {
      // Prepare: 1 s into the lease (2 s left), the release is applied but its answer would take 30 s.
      const w = world();
      const held = await claimAttempt(w, 1);
      await vi.advanceTimersByTimeAsync(1000);
      const at = Date.now();
      w.doc.faults.delayNext('release', 10 * LEASE_MS, { when: 'after' });
      let action: RecordAction | undefined;

      // Act: the bound is max(one lease, time left) = 3 s.
      const settling = held.settle(failure()).then((a) => {
        action = a;
      });
      await vi.advanceTimersByTimeAsync(LEASE_MS - 1);

      // Assess 1: still waiting for the answer; M not given back yet.
      expect(action).toBeUndefined();
      expect(w.original(held.record)?.visibleAt).toBe(at - 1000 + VISIBILITY_S * 1000);

      // Act 2
      await vi.advanceTimersByTimeAsync(1);
      await settling;

      // Assess 2: given up at the bound; M is hidden for the backoff from then.
      expect(action).toBe('retry');
      expect(w.original(held.record)?.visibleAt).toBe(at + LEASE_MS + 8_000);
      expect((await w.item())?.status).toBe(JobStatus.RetryWait);
    });

    it('bounds the release after a run-out by one lease, not by the (negative) time left', async () => {
      // Prepare: the lease ended 2 s ago; the release's answer would take 30 s.
      const w = world();
      const held = await claimAttempt(w, 1);
      await vi.advanceTimersByTimeAsync(LEASE_MS + 2000);
      w.doc.faults.delayNext('release', 10 * LEASE_MS, { when: 'after' });
      let action: RecordAction | undefined;

      // Act
      const settling = held
        .settle(
          new LeaseRanOutError(KEY, held.attempt.lease.token, 'ran out', undefined, { renewalFailed: true }),
        )
        .then((a) => {
          action = a;
        });
      await vi.advanceTimersByTimeAsync(LEASE_MS - 1);
      const early = action;
      await vi.advanceTimersByTimeAsync(1);
      await settling;

      // Assess
      expect(early).toBeUndefined();
      expect(action).toBe('lease-ran-out');
    });

    it('takes a release refused by the job COMPLETED under this lease (a lost commit answer) as done: completed, M untouched', async () => {
      // Prepare: the commit applied, its answer was lost and the read that would settle it failed too, so
      // commit() reports an outage.
      const w = world();
      const held = await claimAttempt(w, 1);
      w.doc.faults.failNext('complete', undefined, { when: 'after' }).failNext('get');
      const error = await commit(
        held.s,
        held.attempt.lease,
        'ok',
        [],
        new AbortController().signal,
        held.attempt.log,
      ).catch((thrown: unknown) => thrown);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      afterAWrite();
      const before = await w.item();
      const mBefore = w.original(held.record);

      // Act
      const action = await held.settle(error);

      // Assess: the release met the COMPLETED item of this lease: done, nothing released, M not given back.
      expect(action).toBe('completed');
      expect(before).toMatchObject({ status: JobStatus.Completed, owner: 'w-a', attempts: 1 });
      expect(await w.item()).toEqual(before);
      expect(w.original(held.record)).toEqual(mBefore);
      expect(w.cache.has(KEY)).toBe(true);
      expect(w.metrics.get(MetricName.JobSucceeded)).toBe(1);
      expect(w.metrics.get(MetricName.JobSucceeded, { jobType: TYPE })).toBe(1);
    });

    // Same rule: a job the release finds COMPLETED is counted as succeeded only, not also as retried.
    it('counts no JobRetried for a job the release found completed (docs: JobRetried = an attempt was released)', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);
      await commitWithLostAnswer(w, held);

      // Act
      const action = await held.settle(failure());

      // Assess
      expect(action).toBe('completed');
      expect(w.metrics.get(MetricName.JobRetried)).toBe(0);
    });

    // docs/protocol.md, "Store outages": an outage does not use up attempts (within the refund budget).
    // An outage on the last attempt often makes the refund (the release) fail as well; unrefunded, the
    // lease would expire and M's takeover count an attempt past maxAttempts ("Exhausted takeover"), so a
    // refund release that fails is tried again within its bound.
    it('does not use up the job’s attempts for an outage on the last attempt whose release fails too (docs: "Store outages")', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, MAX_ATTEMPTS);
      w.doc.faults.failNext('release');

      // Act: the outage is settled; M returns after the backoff (30 s) and is claimed again.
      const settling = held.settle(outage());
      await vi.advanceTimersByTimeAsync(LEASE_MS);
      const action = await settling;
      await vi.advanceTimersByTimeAsync(30_000);
      const again = await w.claimAs(w.receive(), 'w-b');

      // Assess: the refund got through on its second try; the claim is the last attempt again, not past it.
      expect(action).toBe('retry');
      expect(w.doc.faults.injected.get('release')).toBe(1);
      expect((await w.item())?.status).toBe(JobStatus.InProgress);
      expect(again.attempt.lease.attempts).toBe(MAX_ATTEMPTS);
    });

    // rev18 C: the retry of a refund release is a fresh write; when the first try landed and only its
    // answer was lost, the owner is gone and the fence refuses the retry. That is our release, not a loss.
    it('takes a refund release that landed with its answer lost as released: retry, M back with its backoff, no LeaseLost', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);
      w.doc.faults.failNext('release', undefined, { when: 'after' });
      const at = Date.now();

      // Act
      const settling = held.settle(outage());
      await vi.advanceTimersByTimeAsync(LEASE_MS);
      const action = await settling;

      // Assess: one refund (not two), M hidden for the backoff after attempt 1 (8 s), counted as a retry.
      expect(action).toBe('retry');
      expect(await w.item()).toMatchObject({ status: JobStatus.RetryWait, attempts: 0, refunds: 1 });
      // (given back after the retry's 200 ms pause)
      expect(w.original(held.record)?.visibleAt).toBe(at + 200 + 8_000);
      expect(w.metrics.get(MetricName.LeaseLost)).toBe(0);
      expect(w.metrics.get(MetricName.JobRetried)).toBe(1);
    });

    it('still reports lease-lost when a refund release’s retry is refused by a new owner', async () => {
      // Prepare: the first try fails before it lands; w-b takes the job over meanwhile.
      const w = world();
      const { mine } = await takenOver(w);
      w.doc.faults.failNext('release');

      // Act
      const settling = mine.settle(outage());
      await vi.advanceTimersByTimeAsync(LEASE_MS);
      const action = await settling;

      // Assess
      expect(action).toBe('lease-lost');
      expect(await w.item()).toMatchObject({ status: JobStatus.InProgress, owner: 'w-b' });
      expect(w.metrics.get(MetricName.JobRetried)).toBe(0);
    });
  });
});
