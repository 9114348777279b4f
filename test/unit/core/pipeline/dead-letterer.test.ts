import { Logger } from '@aws-lambda-powertools/logger';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DynamoDbJobStore } from '../../../../shared/core/adapters/dynamodb-job-store.ts';
import { type JobEnvelope, makeEnvelope, parseEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type { JobLease, JobStore } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { type DeadLetterCause, decideFailure } from '../../../../shared/core/decisions/failure-decision.ts';
import { capLeaseToDeadline } from '../../../../shared/core/decisions/lease-timing.ts';
import { JobRenewer } from '../../../../shared/core/leases/renewer.ts';
import { JobLog } from '../../../../shared/core/observe/job-log.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { DeadLetterer } from '../../../../shared/core/pipeline/dead-letterer.ts';
import { RecordMessage } from '../../../../shared/core/pipeline/record-message.ts';
import { TransientJobError } from '../../../../shared/errors.ts';
import { parseCondition, parseUpdate } from '../../../../shared/testing/dynamodb-expressions.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { expectOnlyLeaseLostNoted } from '../../../support/history.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// DeadLetterer on the in-memory job store and queue (with its DLQ) under fake timers: protocol edge E9
// and the bad-body path. Every test reads the state afterwards: the item in the store, the letters in the
// DLQ, and whether the original message M is still in the queue (and when it shows again). The invariant
// that runs through all of them: never a DEAD item without a letter, and an unfinished job always keeps M.

const LEASE_MS = 3000;
const KEY = 'job-1';
const TYPE = 'test.work';
const MAX_ATTEMPTS = 3;
/** A backoff that is easy to read back from M's visibility: 10 s per attempt. */
const backoffSeconds = (attempts: number) => 10 * attempts;

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const logger = new Logger({ logLevel: 'SILENT' });

function envelopeBody(dedupKey = KEY): string {
  return JSON.stringify(makeEnvelope({ id: 'e-1', type: TYPE, dedupKey, payload: { n: 1 } }));
}

/** A worker's view of one job: the record it received, its lease and renewer, and its DeadLetterer. */
interface Held {
  readonly worker: string;
  readonly record: SQSRecord;
  readonly message: RecordMessage;
  readonly envelope: JobEnvelope;
  readonly lease: JobLease;
  readonly renewer: JobRenewer;
  readonly log: JobLog;
  readonly deadLetterer: DeadLetterer;
}

function world(options: { store?: JobStore } = {}) {
  const { doc, store: memory } = memoryStores();
  const store: JobStore = options.store ?? memory;
  const queue = new InMemoryQueue({ visibilitySeconds: 30 });
  const metrics = new InMemoryMetrics();
  const deadLetterer = (worker: string) =>
    new DeadLetterer({ store, queue, metrics, worker, backoffSeconds, callBudgetMs: LEASE_MS });
  const log = new JobLog(logger, { dedupKey: KEY });

  /** Receives the next visible message as `worker` would. */
  const receive = (): SQSRecord => {
    const [record] = queue.receive(1);
    if (!record) throw new Error('no visible message');
    return record;
  };

  /** `worker` claims the job of `record` (throws when refused) and gets what the processor would build. */
  const claim = async (
    record: SQSRecord,
    worker: string,
    extra: { deadline?: number } = {},
  ): Promise<Held> => {
    const envelope = parseEnvelope(record.body);
    const result = await store.claim({
      dedupKey: envelope.dedupKey,
      owner: worker,
      messageId: record.messageId,
      type: envelope.type,
      createdAt: envelope.createdAt,
      // Capped to the deadline, as the processor caps every claim.
      leaseMs: capLeaseToDeadline(LEASE_MS, Date.now(), extra.deadline),
      now: Date.now(),
    });
    if (!result.claimed) throw new Error(`expected ${worker} to claim, found ${result.existing.status}`);
    const renewer = new JobRenewer({
      store,
      queue,
      lease: result.lease,
      receiptHandle: record.receiptHandle,
      leaseMs: LEASE_MS,
      ...(extra.deadline === undefined ? {} : { deadline: extra.deadline }),
      log,
      now: () => Date.now(),
    });
    return {
      worker,
      record,
      message: new RecordMessage(queue, record, log),
      envelope,
      lease: result.lease,
      renewer,
      log,
      deadLetterer: deadLetterer(worker),
    };
  };

  /** The dead-lettering as the processor runs it for `held`. */
  const deadLetter = (held: Held, cause: DeadLetterCause) => held.deadLetterer.claimed(held, cause);

  /** M as the queue holds it now (undefined: deleted). */
  const original = (record: SQSRecord) => queue.messages().find((m) => m.messageId === record.messageId);

  /** The protocol's invariant: a DEAD item always has its letter in the DLQ. */
  const assertNoDeadWithoutLetter = async (dedupKey = KEY) => {
    const item = await store.get(dedupKey);
    if (item?.status === JobStatus.Dead) {
      expect(queue.deadLetters.some((letter) => letter.reason.dedupKey === dedupKey)).toBe(true);
    }
  };

  return {
    memory,
    doc,
    store,
    queue,
    metrics,
    deadLetterer,
    log,
    receive,
    claim,
    deadLetter,
    original,
    assertNoDeadWithoutLetter,
  };
}

/** Runs the claims (each after the previous lease was released for a retry) up to `attempts`. */
async function claimAttempt(w: ReturnType<typeof world>, attempts: number, worker = 'w-a'): Promise<Held> {
  w.queue.send(envelopeBody());
  let held = await w.claim(w.receive(), worker);
  while (held.lease.attempts < attempts) {
    await w.store.release(held.lease, Date.now(), {
      message: `TransientJobError: try ${held.lease.attempts} failed`,
      errorClass: 'TransientJobError',
    });
    await vi.advanceTimersByTimeAsync(30_001);
    held = await w.claim(w.receive(), worker);
  }
  return held;
}

/** The cause the failure decision gives for the last attempt failing with `error`. */
function maxAttemptsCause(error: unknown, attempts: number): DeadLetterCause {
  const decision = decideFailure(error, { attempts, maxAttempts: MAX_ATTEMPTS, backoffSeconds });
  if (decision.kind !== 'dead-letter') throw new Error(`expected a dead letter, got ${decision.kind}`);
  return decision.cause;
}

const failure = new TransientJobError('downstream refused the transfer');

describe('Class: DeadLetterer', () => {
  describe('Method: unclaimed', () => {
    it('dead-letters a body that is not JSON with its reason and the FIFO group, and deletes M', async () => {
      // Prepare
      const w = world();
      w.queue.send('this is not json', { groupId: 'g-1' });
      const record = w.receive();
      let error: unknown;
      try {
        parseEnvelope(record.body);
      } catch (caught) {
        error = caught;
      }

      // Act
      const outcome = await w
        .deadLetterer('w-a')
        .unclaimed(new RecordMessage(w.queue, record, w.log), error, w.log);

      // Assess
      expect(outcome).toEqual({ action: 'dead-lettered' });
      expect(w.queue.deadLetters).toEqual([
        {
          body: 'this is not json',
          groupId: 'g-1',
          reason: {
            reason: 'invalid-not-json',
            errorClass: 'InvalidEnvelopeError',
            errorMessage: expect.stringMatching(
              /^InvalidEnvelopeError: not a leaseq envelope: the body is not JSON/,
            ),
            attempts: 0,
            worker: 'w-a',
            messageId: record.messageId,
          },
        },
      ]);
      expect(w.original(record)).toBeUndefined();
      expect(w.queue.size).toBe(0);
      expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(1);
      // No jobType breakdown for a body whose type is not trusted.
      expect([...w.metrics.counters.keys()].filter((k) => k.startsWith('JobDeadLettered{'))).toEqual([]);
    });

    it('names the dedup key of a bad envelope when the body has one, and still writes no item', async () => {
      // Prepare: a well-formed envelope of a type this worker does not know.
      const w = world();
      const body = JSON.stringify(
        makeEnvelope({ id: 'e-9', type: 'nobody.knows', dedupKey: 'bad-1', payload: {} }),
      );
      w.queue.send(body);
      const record = w.receive();
      let error: unknown;
      try {
        parseEnvelope(record.body, { isKnownType: () => false });
      } catch (caught) {
        error = caught;
      }

      // Act
      const outcome = await w
        .deadLetterer('w-a')
        .unclaimed(new RecordMessage(w.queue, record, w.log), error, w.log);

      // Assess
      expect(outcome.action).toBe('dead-lettered');
      expect(w.queue.deadLetters.map((l) => l.reason)).toEqual([
        {
          reason: 'invalid-unknown-type',
          errorClass: 'InvalidEnvelopeError',
          errorMessage: 'InvalidEnvelopeError: job type nobody.knows is not registered',
          attempts: 0,
          dedupKey: 'bad-1',
          worker: 'w-a',
          messageId: record.messageId,
        },
      ]);
      expect(w.queue.deadLetters[0]?.body).toBe(body);
      expect(w.queue.deadLetters[0]?.groupId).toBeUndefined();
      expect(await w.store.get('bad-1')).toBeUndefined();
      expect(w.queue.size).toBe(0);
    });

    it('reports any other error as a bad schema, with its own class', async () => {
      // Prepare
      const w = world();
      w.queue.send('{"dedupKey":"odd"}');
      const record = w.receive();

      // Act
      await w
        .deadLetterer('w-a')
        .unclaimed(new RecordMessage(w.queue, record, w.log), new RangeError('odd'), w.log);

      // Assess
      expect(w.queue.deadLetters.map((l) => l.reason)).toEqual([
        expect.objectContaining({
          reason: 'invalid-bad-schema',
          errorClass: 'RangeError',
          errorMessage: 'RangeError: odd',
          dedupKey: 'odd',
        }),
      ]);
      expect(w.queue.size).toBe(0);
    });

    it('keeps M for a retry when the DLQ send fails, and dead-letters it on its next delivery', async () => {
      // Prepare
      const w = world();
      w.queue.send('not json');
      const record = w.receive();
      w.queue.faults.failNext('send-to-dead-letter');
      const error = new RangeError('bad');

      // Act 1
      const outcome = await w
        .deadLetterer('w-a')
        .unclaimed(new RecordMessage(w.queue, record, w.log), error, w.log);

      // Assess 1: no letter, M kept and hidden for backoffSeconds(2), nothing counted as dead-lettered.
      expect(outcome).toEqual({ action: 'retry' });
      expect(w.queue.deadLetters).toEqual([]);
      expect(w.original(record)?.visibleAt).toBe(Date.now() + backoffSeconds(2) * 1000);
      expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(0);

      // Act 2: M comes back after its backoff.
      await vi.advanceTimersByTimeAsync(backoffSeconds(2) * 1000);
      const again = w.receive();
      const second = await w
        .deadLetterer('w-b')
        .unclaimed(new RecordMessage(w.queue, again, w.log), error, w.log);

      // Assess 2
      expect(again.messageId).toBe(record.messageId);
      expect(second.action).toBe('dead-lettered');
      expect(w.queue.deadLetters).toHaveLength(1);
      expect(w.queue.size).toBe(0);
    });
  });

  describe('Method: claimed', () => {
    it('dead-letters a job that reached max attempts: the letter says why, the item is DEAD, M is deleted', async () => {
      // Prepare: the third and last attempt failed.
      const w = world();
      const held = await claimAttempt(w, MAX_ATTEMPTS);
      const before = await w.store.get(KEY);
      const cause = maxAttemptsCause(failure, held.lease.attempts);

      // Act
      const outcome = await w.deadLetter(held, cause);

      // Assess: the letter carries the original body and every reason attribute.
      expect(outcome).toEqual({ action: 'dead-lettered' });
      expect(w.queue.deadLetters).toEqual([
        {
          body: held.record.body,
          reason: {
            reason: 'max-attempts',
            errorClass: 'TransientJobError',
            errorMessage: 'TransientJobError: downstream refused the transfer',
            attempts: MAX_ATTEMPTS,
            dedupKey: KEY,
            worker: 'w-a',
            messageId: held.record.messageId,
            type: TYPE,
          },
        },
      ]);
      // The item is DEAD with the cause; owner gone, lease 0, one content change, same token.
      const item = await w.store.get(KEY);
      expect(item).toMatchObject({
        status: JobStatus.Dead,
        leaseUntil: 0,
        attempts: MAX_ATTEMPTS,
        token: held.lease.token,
        version: (before?.version ?? 0) + 1,
        lastError: 'TransientJobError: downstream refused the transfer',
        lastErrorClass: 'TransientJobError',
      });
      expect(item?.owner).toBeUndefined();
      // M is gone; counted once, with its job type.
      expect(w.original(held.record)).toBeUndefined();
      expect(w.queue.size).toBe(0);
      expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(1);
      expect(w.metrics.get(MetricName.JobDeadLettered, { jobType: TYPE })).toBe(1);
      await w.assertNoDeadWithoutLetter();
    });

    it('keeps the FIFO group of M on the letter', async () => {
      // Prepare
      const w = world();
      w.queue.send(envelopeBody(), { groupId: 'account-42' });
      const held = await w.claim(w.receive(), 'w-a');

      // Act
      await w.deadLetter(held, {
        reason: 'permanent-error',
        errorClass: 'PermanentJobError',
        errorMessage: 'no',
      });

      // Assess
      expect(w.queue.deadLetters.map((l) => l.groupId)).toEqual(['account-42']);
      expect((await w.store.get(KEY))?.status).toBe(JobStatus.Dead);
      expect(w.queue.size).toBe(0);
    });

    it('fences first: a worker whose lease was taken over sends NO letter, and leaves the item and M alone', async () => {
      // Prepare: w-a's lease lapses and a duplicate copy lets w-b take the job over.
      const w = world();
      const body = envelopeBody();
      w.queue.send(body);
      w.queue.send(body);
      const [mine, copy] = w.queue.receive(2);
      if (!mine || !copy) throw new Error('expected two records');
      const held = await w.claim(mine, 'w-a');
      await vi.advanceTimersByTimeAsync(LEASE_MS + 1);
      const taker = await w.claim(copy, 'w-b');
      const itemBefore = await w.store.get(KEY);
      const mineBefore = w.original(mine);
      const copyBefore = w.original(copy);

      // Act
      const outcome = await w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS));
      await vi.advanceTimersByTimeAsync(0);

      // Assess: nothing left this worker; the new owner's item is untouched; both messages are as they were.
      expect(outcome).toEqual({ action: 'lease-lost' });
      expect(w.queue.deadLetters).toEqual([]);
      expectOnlyLeaseLostNoted(await w.store.get(KEY), itemBefore, 'w-a');
      expect(itemBefore).toMatchObject({
        status: JobStatus.InProgress,
        owner: 'w-b',
        token: taker.lease.token,
      });
      expect(w.original(mine)).toEqual(mineBefore);
      expect(w.original(copy)).toEqual(copyBefore);
      expect(w.metrics.get(MetricName.LeaseLost)).toBe(1);
      expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(0);
    });

    it('goes through when the lease lapsed but nobody took the job: the fence is owner and token, not the clock', async () => {
      // Prepare
      const w = world();
      const held = await claimAttempt(w, 1);
      await vi.advanceTimersByTimeAsync(LEASE_MS * 5);

      // Act
      const outcome = await w.deadLetter(held, {
        reason: 'permanent-error',
        errorClass: 'PermanentJobError',
        errorMessage: 'PermanentJobError: never',
      });

      // Assess
      expect(outcome.action).toBe('dead-lettered');
      expect((await w.store.get(KEY))?.status).toBe(JobStatus.Dead);
      expect(w.queue.deadLetters).toHaveLength(1);
      expect(w.queue.size).toBe(0);
    });

    describe('a fault at each step keeps M, and never leaves a DEAD item without a letter', () => {
      it('(0) the fence fails (store outage): no letter, the item is untouched, M is given back for a backoff', async () => {
        // Prepare
        const w = world();
        const held = await claimAttempt(w, MAX_ATTEMPTS);
        const itemBefore = await w.store.get(KEY);
        w.doc.faults.failNext('renew');

        // Act
        const outcome = await w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS));
        await vi.advanceTimersByTimeAsync(0);

        // Assess
        expect(outcome).toEqual({ action: 'store-unavailable' });
        expect(w.queue.deadLetters).toEqual([]);
        expect(await w.store.get(KEY)).toEqual(itemBefore);
        expect(w.original(held.record)?.visibleAt).toBe(Date.now() + backoffSeconds(MAX_ATTEMPTS) * 1000);
        expect(w.metrics.get(MetricName.StoreUnavailable)).toBe(1);
        await w.assertNoDeadWithoutLetter();
      });

      it('(0) the fence hangs: it is abandoned after the call budget, with no letter sent', async () => {
        // Prepare: the renewal request is stuck for a minute.
        const w = world();
        const held = await claimAttempt(w, MAX_ATTEMPTS);
        w.doc.faults.delayNext('renew', 60_000, { when: 'before' });
        const start = Date.now();

        // Act
        let settledAt = 0;
        const outcome = w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS)).then((o) => {
          settledAt = Date.now();
          return o;
        });
        await vi.advanceTimersByTimeAsync(LEASE_MS);

        // Assess (settled first, so a hang fails here rather than at the test timeout)
        expect(settledAt - start).toBe(LEASE_MS);
        expect(await outcome).toEqual({ action: 'store-unavailable' });
        expect(w.queue.deadLetters).toEqual([]);
        expect((await w.store.get(KEY))?.status).toBe(JobStatus.InProgress);
        expect(w.original(held.record)?.visibleAt).toBe(Date.now() + backoffSeconds(MAX_ATTEMPTS) * 1000);
      });

      it('(1) the DLQ send fails: no letter, the item stays IN_PROGRESS and ours, M is given back for a backoff', async () => {
        // Prepare
        const w = world();
        const held = await claimAttempt(w, MAX_ATTEMPTS);
        w.queue.faults.failNext('send-to-dead-letter');
        const at = Date.now();

        // Act
        const outcome = await w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS));
        await vi.advanceTimersByTimeAsync(0);

        // Assess: the fence renewed the lease (one lease from now); nothing else was written.
        expect(outcome).toEqual({ action: 'retry' });
        expect(w.queue.deadLetters).toEqual([]);
        expect(await w.store.get(KEY)).toMatchObject({
          status: JobStatus.InProgress,
          owner: 'w-a',
          token: held.lease.token,
          leaseUntil: at + LEASE_MS,
        });
        expect(w.original(held.record)?.visibleAt).toBe(at + backoffSeconds(MAX_ATTEMPTS) * 1000);
        expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(0);
        await w.assertNoDeadWithoutLetter();
      });

      it('(2) the DEAD marking fails (outage): the letter is out, the item is not DEAD, M is kept and finishes the job later', async () => {
        // Prepare
        const w = world();
        const held = await claimAttempt(w, MAX_ATTEMPTS);
        w.doc.faults.failNext('mark-dead');
        const cause = maxAttemptsCause(failure, MAX_ATTEMPTS);

        // Act 1
        const outcome = await w.deadLetter(held, cause);
        await vi.advanceTimersByTimeAsync(0);

        // Assess 1: the item is unfinished and M, given back for a backoff, is what brings it back.
        expect(outcome).toEqual({ action: 'store-unavailable' });
        expect(w.queue.deadLetters).toHaveLength(1);
        expect((await w.store.get(KEY))?.status).toBe(JobStatus.InProgress);
        expect(w.original(held.record)?.visibleAt).toBe(Date.now() + backoffSeconds(MAX_ATTEMPTS) * 1000);
        expect(w.metrics.get(MetricName.StoreUnavailable)).toBe(1);
        expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(0);
        await w.assertNoDeadWithoutLetter();

        // Act 2: M returns after its backoff (the lease has ended by then); the next claim takes the job
        // over past its attempts and finishes the dead-lettering, as the processor does.
        await vi.advanceTimersByTimeAsync(backoffSeconds(MAX_ATTEMPTS) * 1000);
        const again = await w.claim(w.receive(), 'w-b');
        expect(again.record.messageId).toBe(held.record.messageId);
        expect(again.lease.attempts).toBe(MAX_ATTEMPTS + 1);
        const finished = await w.deadLetter(again, cause);

        // Assess 2: DEAD, a second letter (the DLQ is at-least-once), M deleted.
        expect(finished.action).toBe('dead-lettered');
        expect((await w.store.get(KEY))?.status).toBe(JobStatus.Dead);
        expect(w.queue.deadLetters.map((l) => l.reason.worker)).toEqual(['w-a', 'w-b']);
        expect(w.queue.size).toBe(0);
      });

      it('(2) the DEAD marking is refused (the job was taken over meanwhile): the stale letter is out, the item is the new owner’s, M is left alone', async () => {
        // Prepare: the DLQ answer takes longer than the lease the fence granted, and a duplicate copy lets
        // w-b take the job over in between.
        const w = world();
        const body = envelopeBody();
        w.queue.send(body);
        w.queue.send(body);
        const [mine, copy] = w.queue.receive(2);
        if (!mine || !copy) throw new Error('expected two records');
        const held = await w.claim(mine, 'w-a');
        w.queue.faults.delayNext('send-to-dead-letter', LEASE_MS + 1000, { when: 'after' });

        // Act
        const fencedAt = Date.now();
        const outcome = w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS));
        await vi.advanceTimersByTimeAsync(LEASE_MS + 1);
        const taker = await w.claim(copy, 'w-b');
        await vi.advanceTimersByTimeAsync(1000);

        // Assess: lost, not given back; DEAD never written; the new owner holds an IN_PROGRESS item.
        expect(await outcome).toEqual({ action: 'lease-lost' });
        expect(w.queue.deadLetters).toHaveLength(1);
        expect(await w.store.get(KEY)).toMatchObject({
          status: JobStatus.InProgress,
          owner: 'w-b',
          token: taker.lease.token,
        });
        // M keeps the visibility the fence gave it (ceil(3 s) + 1 s from the fence), no backoff.
        expect(w.original(mine)?.visibleAt).toBe(fencedAt + 4000);
        expect(w.metrics.get(MetricName.LeaseLost)).toBe(1);
        expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(0);
        await w.assertNoDeadWithoutLetter();
      });

      it('(3) the delete of M fails: the item is DEAD with its letter, and the copy left behind is refused as a dead copy', async () => {
        // Prepare
        const w = world();
        const held = await claimAttempt(w, MAX_ATTEMPTS);
        w.queue.faults.failNext('delete');

        // Act
        const outcome = await w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS));

        // Assess: dead-lettered (the batch's own delete takes another go at M); M is still in the queue.
        expect(outcome).toEqual({ action: 'dead-lettered' });
        expect((await w.store.get(KEY))?.status).toBe(JobStatus.Dead);
        expect(w.queue.deadLetters).toHaveLength(1);
        expect(w.original(held.record)).toBeDefined();
        await w.assertNoDeadWithoutLetter();
        // The metric counts the dead-lettering even though this delete failed (see the report).
        expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(1);

        // When M shows again, its claim is refused by the DEAD item: it can only be dropped.
        await vi.advanceTimersByTimeAsync(30_000);
        const again = w.receive();
        const refused = await w.store.claim({
          dedupKey: KEY,
          owner: 'w-b',
          messageId: again.messageId,
          type: TYPE,
          createdAt: new Date().toISOString(),
          leaseMs: LEASE_MS,
          now: Date.now(),
        });
        expect(refused).toMatchObject({ claimed: false, existing: { status: JobStatus.Dead } });
      });
    });

    describe('a lost answer on the DEAD marking', () => {
      it('in memory (no recognition): the item is DEAD with its letter, M is kept, and its next claim is refused as a dead copy', async () => {
        // Prepare: the marking is applied and its answer lost.
        const w = world();
        const held = await claimAttempt(w, MAX_ATTEMPTS);
        w.doc.faults.failNext('mark-dead', undefined, { when: 'after' });

        // Act
        const outcome = await w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS));

        // Assess: the worker could not know, so it kept M; the state is the "after (2), before (3)" row.
        expect(outcome).toEqual({ action: 'store-unavailable' });
        expect((await w.store.get(KEY))?.status).toBe(JobStatus.Dead);
        expect(w.queue.deadLetters).toHaveLength(1);
        expect(w.original(held.record)?.visibleAt).toBe(Date.now() + backoffSeconds(MAX_ATTEMPTS) * 1000);
        await w.assertNoDeadWithoutLetter();
        await vi.advanceTimersByTimeAsync(backoffSeconds(MAX_ATTEMPTS) * 1000);
        const again = w.receive();
        expect(again.messageId).toBe(held.record.messageId);
        await expect(w.claim(again, 'w-b')).rejects.toThrow(/found DEAD/);
      });

      it('on the DynamoDB store: a refused retry whose item shows our own write is success, and M is deleted', async () => {
        // Prepare: the SDK's retry of the marking meets the item the first try wrote.
        const table = new FencedUpdateTable();
        const store = new DynamoDbJobStore({ client: table.client(), tableName: 'jobs' });
        const w = world({ store });
        const held = await heldOnTable(w, table);
        table.loseAnswerOfNext((input) => input.ExpressionAttributeValues?.[':status'] === JobStatus.Dead);

        // Act
        const outcome = await w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS));

        // Assess
        expect(table.lostAnswers).toBe(1);
        expect(outcome).toEqual({ action: 'dead-lettered' });
        expect(table.items.get(KEY)).toMatchObject({
          status: JobStatus.Dead,
          token: held.lease.token,
          version: 6,
          lastErrorClass: 'TransientJobError',
        });
        expect(table.items.get(KEY)?.owner).toBeUndefined();
        expect(w.queue.deadLetters).toHaveLength(1);
        expect(w.queue.size).toBe(0);
        expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(1);
        expect(w.metrics.get(MetricName.LeaseLost)).toBe(0);
      });

      it('on the DynamoDB store: a refused retry whose item is not our write (reset by a redrive meanwhile) is a lost lease, and M is left alone', async () => {
        // Prepare: between the first try and the retry, an operator's redrive reset the item.
        const table = new FencedUpdateTable();
        const store = new DynamoDbJobStore({ client: table.client(), tableName: 'jobs' });
        const w = world({ store });
        const held = await heldOnTable(w, table);
        table.loseAnswerOfNext(
          (input) => input.ExpressionAttributeValues?.[':status'] === JobStatus.Dead,
          (item) => ({
            ...item,
            status: JobStatus.RetryWait,
            attempts: 0,
            version: Number(item.version) + 1,
          }),
        );

        // Act
        const outcome = await w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS));
        await vi.advanceTimersByTimeAsync(0);
        const mine = w.original(held.record);

        // Assess
        expect(table.lostAnswers).toBe(1);
        expect(outcome).toEqual({ action: 'lease-lost' });
        expect(table.items.get(KEY)).toMatchObject({ status: JobStatus.RetryWait, version: 7 });
        expect(w.queue.deadLetters).toHaveLength(1);
        expect(mine).toBeDefined();
        expect(mine?.visibleAt).toBe(Date.now() + 4000);
        expect(w.metrics.get(MetricName.JobDeadLettered)).toBe(0);
      });
    });

    // docs/protocol.md, "Timing rules", Lambda deadline: "Every lease and renewal is capped to it." The
    // fence was not (it granted at least one call budget whatever the deadline) until issue 18: now it is
    // capped, and a dead-lettering the deadline cuts short is finished from the cause the fence recorded.
    it('caps the fence’s lease to the invocation deadline, like every other lease (docs/protocol.md)', async () => {
      // Prepare: 500 ms left before the deadline; the send fails so the fence's lease stays visible.
      const w = world();
      w.queue.send(envelopeBody());
      const deadline = Date.now() + 500;
      const held = await w.claim(w.receive(), 'w-a', { deadline });
      w.queue.faults.failNext('send-to-dead-letter');

      // Act
      await w.deadLetter(held, maxAttemptsCause(failure, MAX_ATTEMPTS));

      // Assess
      expect((await w.store.get(KEY))?.leaseUntil).toBeLessThanOrEqual(deadline);
    });
  });
});

/** Puts an IN_PROGRESS item held by `w-a` (attempt 3, version 5) on the table and builds what w-a holds. */
async function heldOnTable(w: ReturnType<typeof world>, table: FencedUpdateTable): Promise<Held> {
  w.queue.send(envelopeBody());
  const record = w.receive();
  const lease: JobLease = {
    dedupKey: KEY,
    owner: 'w-a',
    token: 42,
    attempts: MAX_ATTEMPTS,
    messageId: record.messageId,
    version: 5,
    leaseUntil: Date.now() + LEASE_MS,
  };
  table.items.set(KEY, {
    dedupKey: KEY,
    status: JobStatus.InProgress,
    owner: lease.owner,
    token: lease.token,
    attempts: lease.attempts,
    version: lease.version,
    leaseUntil: lease.leaseUntil,
    messageId: record.messageId,
    type: TYPE,
  });
  return {
    worker: 'w-a',
    record,
    message: new RecordMessage(w.queue, record, w.log),
    envelope: parseEnvelope(record.body),
    lease,
    renewer: new JobRenewer({
      store: w.store,
      queue: w.queue,
      lease,
      receiptHandle: record.receiptHandle,
      leaseMs: LEASE_MS,
      log: w.log,
      now: () => Date.now(),
    }),
    log: w.log,
    deadLetterer: w.deadLetterer('w-a'),
  };
}

type Item = Record<string, unknown>;

/**
 * A one-table DynamoDB double for the DynamoDB job store's fenced updates (the renewal and the DEAD
 * marking): conditions and updates are evaluated by the in-memory DynamoDB expression evaluator
 * (shared/testing/dynamodb-expressions.ts, which also knows `list_append` and `if_not_exists` of the
 * history), so a test never passes on semantics it only guessed. A refused condition answers ConditionalCheckFailedException with the item (ALL_OLD).
 * `loseAnswerOfNext` models a lost answer the way the SDK meets one: the write is applied, the answer
 * lost, and the same request sent again (its retry), whose answer the caller gets.
 */
class FencedUpdateTable {
  readonly items = new Map<string, Item>();
  lostAnswers = 0;
  #lose: { which: (input: UpdateCommandInput) => boolean; meanwhile?: (item: Item) => Item } | undefined;

  loseAnswerOfNext(which: (input: UpdateCommandInput) => boolean, meanwhile?: (item: Item) => Item): void {
    this.#lose = { which, ...(meanwhile ? { meanwhile } : {}) };
  }

  client(): DynamoDBDocumentClient {
    return { send: (command: unknown) => this.#send(command) } as unknown as DynamoDBDocumentClient;
  }

  async #send(command: unknown): Promise<unknown> {
    await Promise.resolve();
    if (!(command instanceof UpdateCommand))
      throw new Error('FencedUpdateTable only understands UpdateCommand');
    const input = command.input;
    const lose = this.#lose;
    if (lose?.which(input)) {
      this.#lose = undefined;
      this.lostAnswers += 1;
      this.#apply(input);
      const key = String(input.Key?.dedupKey);
      const item = this.items.get(key);
      if (lose.meanwhile && item) this.items.set(key, lose.meanwhile(item));
    }
    return this.#apply(input);
  }

  #apply(input: UpdateCommandInput): Record<string, never> {
    const key = String(input.Key?.dedupKey);
    const item = this.items.get(key);
    const names = input.ExpressionAttributeNames ?? {};
    const values = input.ExpressionAttributeValues ?? {};
    if (!item || !this.#holds(input.ConditionExpression ?? '', item, names, values)) {
      throw new ConditionalCheckFailedException({
        message: 'The conditional request failed',
        $metadata: { httpStatusCode: 400 },
        ...(item ? { Item: marshall(item, { removeUndefinedValues: true }) } : {}),
      });
    }
    this.items.set(key, this.#update(input.UpdateExpression ?? '', item, names, values));
    return {};
  }

  #holds(
    condition: string,
    item: Item,
    names: Record<string, string>,
    values: Record<string, unknown>,
  ): boolean {
    return parseCondition(condition, { names, values })(item);
  }

  #update(
    expression: string,
    item: Item,
    names: Record<string, string>,
    values: Record<string, unknown>,
  ): Item {
    return parseUpdate(expression, { names, values })(item);
  }
}
