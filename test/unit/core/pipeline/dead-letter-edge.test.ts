import { Logger } from '@aws-lambda-powertools/logger';
import { InvalidMessageContents, type SQSClient } from '@aws-sdk/client-sqs';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { SqsJobQueue } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { makeEnvelope, parseEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type {
  ClaimRequest,
  ClaimResult,
  JobLease,
  RenewOptions,
  StoreCallOptions,
} from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import type { JobContext } from '../../../../shared/core/model/job-context.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { JobLog } from '../../../../shared/core/observe/job-log.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { DeadLetterer } from '../../../../shared/core/pipeline/dead-letterer.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { RecordMessage } from '../../../../shared/core/pipeline/record-message.ts';
import { claimUpdate, refusedClaim } from '../../../../shared/core/protocol/claim.ts';
import { completeUpdate } from '../../../../shared/core/protocol/complete.ts';
import { FENCE } from '../../../../shared/core/protocol/fence.ts';
import { giveUpError } from '../../../../shared/core/protocol/give-up.ts';
import { MAX_ITEM_BYTES } from '../../../../shared/core/protocol/item-size.ts';
import { redriveUpdate } from '../../../../shared/core/protocol/redrive.ts';
import { renewUpdate } from '../../../../shared/core/protocol/renew.ts';
import { ERROR_TEXT_MAX } from '../../../../shared/error-text.ts';
import { LetterRefusedError, PermanentJobError, StoreRefusedError } from '../../../../shared/errors.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryJobStore } from '../../../../shared/testing/in-memory-job-store.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';

// Issue 18, defect 3, on the in-memory store and queue under fake timers: a letter SQS refuses for its
// contents is sent again minimal (never looped), and the cause a dead-lettering records at its fence lets
// the next delivery finish it without running the job again. Every test reads the state afterwards: the
// item, the letters, and M (the original message).

const LEASE_MS = 3000;
const KEY = 'job-1';
const TYPE = 'test.work';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const logger = new Logger({ logLevel: 'SILENT' });
const body = JSON.stringify(makeEnvelope({ id: 'e-1', type: TYPE, dedupKey: KEY, payload: { n: 1 } }));
const refusal = () =>
  new LetterRefusedError(
    'InvalidMessageContents',
    new InvalidMessageContents({ message: 'Invalid binary character', $metadata: { httpStatusCode: 400 } }),
  );

function world(options: { maxAttempts?: number; fastPath?: boolean } = {}) {
  let runs = 0;
  const work = defineJob({
    type: TYPE,
    payload: z.object({ n: z.number() }),
    ...(options.fastPath ? { fastPath: true } : {}),
    async run() {
      runs += 1;
      throw new PermanentJobError('the account 4111 is closed \u001b[31m');
    },
  });
  const store = new InMemoryJobStore();
  const queue = new InMemoryQueue({ visibilitySeconds: 30 });
  const metrics = new InMemoryMetrics();
  const processor = (worker: string) =>
    new JobProcessor({
      store,
      queue,
      registry: JobRegistry.of([work]),
      worker,
      logger,
      metrics,
      leaseMs: LEASE_MS,
      maxAttempts: options.maxAttempts ?? 3,
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.5,
    });
  const receive = (): SQSRecord => {
    const [record] = queue.receive(1);
    if (!record) throw new Error('no visible message');
    return record;
  };
  /** Processes the next visible message as `worker`, after the clock passed `afterMs`. */
  const deliver = async (worker: string, afterMs = 0) => {
    await vi.advanceTimersByTimeAsync(afterMs);
    return processor(worker).process(receive());
  };
  return { store, queue, metrics, deliver, receive, runs: () => runs };
}

describe('Dead-lettering for every input (issue 18, defect 3)', () => {
  describe('A letter SQS refuses for its contents is final', () => {
    it('a claimed job: one minimal letter (reason, job id, no free text), the item DEAD with the job’s error, M deleted', async () => {
      // Prepare
      const w = world();
      w.queue.send(body);
      w.queue.faults.failNext('send-to-dead-letter', refusal());

      // Act
      const outcome = await w.deliver('w-a');

      // Assess
      expect(outcome.action).toBe('dead-lettered');
      expect(w.queue.deadLetters).toHaveLength(1);
      const reason = w.queue.deadLetters[0]?.reason;
      expect(reason).toMatchObject({ reason: 'permanent-error', dedupKey: KEY, attempts: 1 });
      expect(reason?.errorMessage).toBe(
        'SQS refused the full letter (InvalidMessageContents); the job item keeps the error',
      );
      expect(reason?.errorClass).toBe('');
      expect(JSON.stringify(reason)).not.toContain('4111');
      expect(await w.store.get(KEY)).toMatchObject({
        status: JobStatus.Dead,
        deadReason: 'permanent-error',
        lastError: 'PermanentJobError: the account 4111 is closed \uFFFD[31m',
      });
      expect(w.queue.size).toBe(0);
      expect(w.runs()).toBe(1);
    });

    it('a bad body: one minimal letter with its reason, M deleted', async () => {
      // Prepare
      const w = world();
      w.queue.send('not json \u0000');
      const record = w.receive();
      w.queue.faults.failNext('send-to-dead-letter', refusal());
      const log = new JobLog(logger, {});
      let error: unknown;
      try {
        parseEnvelope(record.body);
      } catch (caught) {
        error = caught;
      }
      const letterer = new DeadLetterer({
        store: w.store,
        queue: w.queue,
        metrics: w.metrics,
        worker: 'w-a',
        backoffSeconds: () => 1,
        callBudgetMs: LEASE_MS,
      });

      // Act
      const outcome = await letterer.unclaimed(new RecordMessage(w.queue, record, log), error, log);

      // Assess
      expect(outcome).toEqual({ action: 'dead-lettered' });
      expect(w.queue.deadLetters).toHaveLength(1);
      expect(w.queue.deadLetters[0]?.reason).toMatchObject({
        reason: 'invalid-not-json',
        errorClass: '',
        errorMessage: 'SQS refused the full letter (InvalidMessageContents)',
      });
      expect(w.queue.size).toBe(0);
    });

    it('a minimal letter refused too keeps M for a retry (no DEAD item without a letter)', async () => {
      // Prepare
      const w = world();
      w.queue.send(body);
      w.queue.faults.failNext('send-to-dead-letter', refusal, { times: 2 });

      // Act
      const outcome = await w.deliver('w-a');

      // Assess
      expect(outcome.action).toBe('retry');
      expect(w.queue.deadLetters).toHaveLength(0);
      expect((await w.store.get(KEY))?.status).toBe(JobStatus.InProgress);
      expect(w.queue.size).toBe(1);
    });
  });

  describe('The dead-letter cause is recorded at the fence', () => {
    it('an interrupted dead-lettering of a PermanentJobError below maxAttempts is finished by the takeover with the recorded cause; the job runs once', async () => {
      // Prepare: the letter's send fails once after the fence (an outage), so M is kept.
      const w = world({ maxAttempts: 3 });
      w.queue.send(body);
      w.queue.faults.failNext('send-to-dead-letter');

      // Act: the first delivery fences and keeps M; the next one comes after the lease ended.
      const first = await w.deliver('w-a');
      const between = await w.store.get(KEY);
      const second = await w.deliver('w-b', 31_000);

      // Assess
      expect(first.action).toBe('retry');
      expect(between).toMatchObject({
        status: JobStatus.InProgress,
        deadReason: 'permanent-error',
        lastErrorClass: 'PermanentJobError',
      });
      expect(second.action).toBe('dead-lettered');
      expect(w.runs()).toBe(1);
      expect(w.queue.deadLetters).toHaveLength(1);
      expect(w.queue.deadLetters[0]?.reason).toMatchObject({
        reason: 'permanent-error',
        errorClass: 'PermanentJobError',
        errorMessage: 'PermanentJobError: the account 4111 is closed \uFFFD[31m',
        worker: 'w-b',
      });
      expect(await w.store.get(KEY)).toMatchObject({ status: JobStatus.Dead, deadReason: 'permanent-error' });
      expect(w.queue.size).toBe(0);
    });

    it('a redrive clears the recorded cause: the job runs again', async () => {
      // Prepare: a dead-lettering interrupted after its fence, then an operator's redrive.
      const w = world({ maxAttempts: 3 });
      w.queue.send(body);
      w.queue.faults.failNext('send-to-dead-letter');
      await w.deliver('w-a');
      await vi.advanceTimersByTimeAsync(31_000);
      expect(await w.store.resetForRedrive(KEY, Date.now())).toBe(true);

      // Act
      const again = await w.deliver('w-b');

      // Assess
      expect((await w.store.get(KEY))?.deadReason).toBe('permanent-error');
      expect(again.action).toBe('dead-lettered');
      expect(w.runs()).toBe(2);
    });

    it('a fast commit never takes a job whose dead-lettering is unfinished', async () => {
      // Prepare: an item whose dead-lettering was cut short (fenced, no letter), its lease over.
      const w = world({ fastPath: true });
      w.queue.send(body);
      w.queue.faults.failNext('send-to-dead-letter');
      // A redelivery runs leased; the first receive runs on the fast path and fails over to a claim.
      await w.deliver('w-a');
      await vi.advanceTimersByTimeAsync(31_000);
      const stored = await w.store.get(KEY);

      // Act: a second copy of the job (a first receive), straight at the one-write commit.
      const result = await w.store.claimAndComplete(
        {
          dedupKey: KEY,
          owner: 'w-b',
          messageId: 'm-2',
          type: TYPE,
          createdAt: new Date().toISOString(),
          now: Date.now(),
          maxAttempts: 3,
        },
        'done',
      );

      // Assess
      expect(stored?.deadReason).toBe('permanent-error');
      expect(result).toMatchObject({ ok: false, reason: 'refused' });
      expect((await w.store.get(KEY))?.status).toBe(JobStatus.InProgress);
    });
  });
});

describe('Class: SqsJobQueue, a refused letter', () => {
  const queueWith = (error: Error) =>
    new SqsJobQueue({
      client: { send: vi.fn(async () => Promise.reject(error)) } as unknown as SQSClient,
      queueUrl: 'https://sqs/q',
      deadLetterQueueUrl: 'https://sqs/dlq',
    });
  const reason = {
    reason: 'permanent-error',
    errorClass: 'E',
    errorMessage: 'm',
    attempts: 1,
    worker: 'w',
    messageId: 'm-1',
  };

  it.each([
    [
      'InvalidMessageContents',
      new InvalidMessageContents({ message: 'bad', $metadata: { httpStatusCode: 400 } }),
    ],
    [
      'InvalidParameterValue',
      Object.assign(new Error('Message must be shorter than 262144 bytes.'), {
        name: 'InvalidParameterValue',
        $metadata: { httpStatusCode: 400 },
      }),
    ],
    [
      'a 400 about attributes',
      Object.assign(new Error('Value for message attribute leaseq.reason is invalid'), {
        name: 'ValidationError',
        $metadata: { httpStatusCode: 400 },
      }),
    ],
  ])('%s is a LetterRefusedError (final)', async (_name, error) => {
    await expect(queueWith(error).sendToDeadLetter('b', reason)).rejects.toBeInstanceOf(LetterRefusedError);
  });

  it.each([
    [
      'a 500',
      Object.assign(new Error('internal'), { name: 'InternalError', $metadata: { httpStatusCode: 500 } }),
    ],
    [
      'throttling',
      Object.assign(new Error('slow down'), { name: 'RequestThrottled', $metadata: { httpStatusCode: 403 } }),
    ],
    [
      'a missing queue',
      Object.assign(new Error('no queue'), { name: 'QueueDoesNotExist', $metadata: { httpStatusCode: 400 } }),
    ],
  ])('%s is passed on as it is (may pass later)', async (_name, error) => {
    await expect(queueWith(error).sendToDeadLetter('b', reason)).rejects.toBe(error);
  });
});

describe('The recorded cause in the DynamoDB expressions', () => {
  const lease = {
    dedupKey: KEY,
    owner: 'w-a',
    token: 7,
    attempts: 1,
    messageId: 'm-1',
    version: 2,
    leaseUntil: 0,
  };

  it('the fence stores the cause as valid, capped text, under the fence alone (its lease may be sooner)', () => {
    const update = renewUpdate('jobs', lease, 1000, 1, {
      reason: 'permanent-error',
      errorClass: 'PermanentJobError',
      errorMessage: `bad \ud800 ${'z'.repeat(2000)}`,
    });
    expect(update.ConditionExpression).toBe(FENCE);
    expect(update.ExpressionAttributeValues[':deadReason']).toBe('permanent-error');
    const text = String(update.ExpressionAttributeValues[':lastError']);
    expect(text.startsWith('bad \uFFFD z')).toBe(true);
    expect(text).toHaveLength(ERROR_TEXT_MAX);
  });

  it('a redrive removes the recorded cause; a fast commit refuses an item that has one', () => {
    expect(redriveUpdate('jobs', KEY, 1, 1).UpdateExpression).toMatch(
      /REMOVE #owner, #deadReason, #refunds, #conflicts, #deadAt, #deadKeyUntil$/,
    );
    const fast = claimUpdate(
      'jobs',
      { dedupKey: KEY, owner: 'w', messageId: 'm', type: TYPE, createdAt: 'c', now: 1 },
      { leaseUntil: 1, expiresAt: 1 },
      { result: null, maxAttempts: 3 },
    );
    expect(fast.ConditionExpression).toContain('attribute_not_exists(#deadReason)');
    expect(fast.ExpressionAttributeNames?.['#deadReason']).toBe('deadReason');
  });
});

// Issue 18 review (rev18): the dead-letter fence and a checkpoint near 400 KB, and a lost claim answer
// over a recorded cause. Each job here runs the given body; the item, M and the runs are read afterwards.
function runningWorld(store: InMemoryJobStore, run: (ctx: JobContext) => Promise<void>) {
  let runs = 0;
  const work = defineJob({
    type: TYPE,
    payload: z.object({ n: z.number() }),
    async run(ctx) {
      runs += 1;
      return run(ctx);
    },
  });
  const queue = new InMemoryQueue({ visibilitySeconds: 30 });
  const metrics = new InMemoryMetrics();
  const processor = (worker: string) =>
    new JobProcessor({
      store,
      queue,
      registry: JobRegistry.of([work]),
      worker,
      logger,
      metrics,
      leaseMs: LEASE_MS,
      maxAttempts: 3,
      backoff: { baseSeconds: 1, capSeconds: 1 },
      random: () => 0.5,
    });
  const deliver = async (worker: string, afterMs = 0) => {
    await vi.advanceTimersByTimeAsync(afterMs);
    const [record] = queue.receive(1);
    if (!record) throw new Error('no visible message');
    const p = processor(worker).process(record);
    await vi.advanceTimersByTimeAsync(5_000);
    return p;
  };
  queue.send(body);
  return { store, queue, metrics, deliver, runs: () => runs };
}

/** Refuses, as DynamoDB does (a ValidationException, StoreRefusedError), a fence past 400 KB, by upper bound. */
class ItemSizeStore extends InMemoryJobStore {
  fences: string[] = [];
  override async renew(lease: JobLease, leaseMs: number, now: number, options: RenewOptions = {}) {
    if (options.deadLetter && lease.checkpoint) {
      const values = renewUpdate(
        'jobs',
        lease,
        now + leaseMs,
        0,
        options.deadLetter,
      ).ExpressionAttributeValues;
      const bytes =
        Buffer.byteLength(JSON.stringify(lease.checkpoint)) +
        640 +
        Buffer.byteLength(String(values[':lastError'] ?? '')) +
        Buffer.byteLength(String(values[':deadReason']));
      this.fences.push(String(values[':lastError'] ?? '(none)'));
      if (bytes > MAX_ITEM_BYTES) throw new StoreRefusedError('item-too-large', 'renew', `${bytes} bytes`);
    }
    return super.renew(lease, leaseMs, now, options);
  }
}

describe('The dead-letter fence near 400 KB (rev18 B)', () => {
  const big = 'x'.repeat(408_000);
  const lease: JobLease = {
    dedupKey: KEY,
    owner: 'w',
    token: 1,
    attempts: 1,
    messageId: 'm',
    version: 2,
    leaseUntil: 0,
    checkpoint: { step: 'a', done: ['a'], data: { a: big }, at: 0 },
  };

  it('the fence stores no more error text than the room the checkpoint leaves, the reason counted', () => {
    const cause = {
      reason: 'permanent-error',
      errorClass: 'PermanentJobError',
      errorMessage: 'e'.repeat(900),
    };
    const room = giveUpError(lease, { message: cause.errorMessage, errorClass: cause.errorClass });
    const values = renewUpdate('jobs', lease, 1, 1, cause).ExpressionAttributeValues;
    expect(values[':deadReason']).toBe('permanent-error');
    const text = String(values[':lastError']);
    expect(text.length).toBeGreaterThan(0);
    expect(text.length).toBeLessThan(room.message.length);
    expect(room.message.length).toBeLessThan(900);
  });

  it('a minimal fence (no text, no class) records the reason and leaves the last error alone', () => {
    const update = renewUpdate('jobs', lease, 1, 1, {
      reason: 'permanent-error',
      errorClass: '',
      errorMessage: '',
    });
    expect(update.UpdateExpression).not.toContain('#lastError');
    expect(update.ExpressionAttributeValues).not.toHaveProperty(':lastError');
    expect(update.ExpressionAttributeValues[':deadReason']).toBe('permanent-error');
  });

  it('a permanently failed job with a 408 KB checkpoint is dead-lettered on its first delivery, run once', async () => {
    const w = runningWorld(new ItemSizeStore(), async (ctx) => {
      await ctx.step('a', async () => ({ data: big }));
      throw new PermanentJobError('e'.repeat(900));
    });
    const first = await w.deliver('w-a');
    expect([first.action, w.runs()]).toEqual(['dead-lettered', 1]);
    const item = await w.store.get(KEY);
    expect(item).toMatchObject({ status: JobStatus.Dead, deadReason: 'permanent-error' });
    expect(w.queue.deadLetters).toHaveLength(1);
    expect(w.queue.size).toBe(0);
  });

  it('a fence the store refuses for its size is sent again minimal, and the job still goes to the DLQ once', async () => {
    class RefuseFirstFence extends InMemoryJobStore {
      tries: RenewOptions['deadLetter'][] = [];
      override async renew(l: JobLease, leaseMs: number, now: number, options: RenewOptions = {}) {
        if (options.deadLetter) {
          this.tries.push(options.deadLetter);
          if (this.tries.length === 1) throw new StoreRefusedError('item-too-large', 'renew', 'too big');
        }
        return super.renew(l, leaseMs, now, options);
      }
    }
    const store = new RefuseFirstFence();
    const w = runningWorld(store, async () => {
      throw new PermanentJobError('closed');
    });
    const first = await w.deliver('w-a');
    expect([first.action, w.runs()]).toEqual(['dead-lettered', 1]);
    expect(store.tries.map((c) => c?.errorMessage)).toEqual(['PermanentJobError: closed', '']);
    expect(await store.get(KEY)).toMatchObject({
      status: JobStatus.Dead,
      deadReason: 'permanent-error',
      lastError: 'PermanentJobError: closed',
    });
  });

  it('the in-memory store refuses a fence or a release that would pass 400 KB, as DynamoDB does', async () => {
    const store = new InMemoryJobStore();
    const claimed = await store.claim({
      dedupKey: KEY,
      owner: 'w',
      messageId: 'm',
      type: TYPE,
      createdAt: 'c',
      now: Date.now(),
      leaseMs: LEASE_MS,
    });
    if (!claimed.claimed) throw new Error('not claimed');
    const own = claimed.lease;
    await store.checkpoint(own, { step: 'a', done: ['a'], data: { a: 'x'.repeat(409_450) }, at: 0 });
    await expect(
      store.renew(own, LEASE_MS, Date.now(), {
        deadLetter: { reason: 'r'.repeat(200), errorClass: '', errorMessage: '' },
      }),
    ).rejects.toBeInstanceOf(StoreRefusedError);
  });
});

/** The DynamoDB adapter's answer when the SDK resent a claim whose first answer was lost. */
class LostClaimAnswerStore extends InMemoryJobStore {
  loseNextClaimAnswer = false;
  override async claim(req: ClaimRequest, options: StoreCallOptions = {}): Promise<ClaimResult> {
    const out = await super.claim(req, options);
    if (!this.loseNextClaimAnswer || !out.claimed) return out;
    this.loseNextClaimAnswer = false;
    const item = await super.get(req.dedupKey);
    return refusedClaim(marshall(item, { removeUndefinedValues: true }), req);
  }
}

describe('A recorded cause and a lost claim answer (rev18 A)', () => {
  it('a claim whose answer was lost still finishes the recorded dead-lettering: the job runs once', async () => {
    const store = new LostClaimAnswerStore();
    const w = runningWorld(store, async () => {
      throw new PermanentJobError('closed');
    });
    w.queue.faults.failNext('send-to-dead-letter'); // the fence lands, the letter send fails: M kept
    expect((await w.deliver('w-a')).action).toBe('retry');
    expect((await store.get(KEY))?.deadReason).toBe('permanent-error');
    store.loseNextClaimAnswer = true;
    expect((await w.deliver('w-b', 31_000)).action).toBe('dead-lettered');
    expect(w.runs()).toBe(1);
    expect(await store.get(KEY)).toMatchObject({ status: JobStatus.Dead, deadReason: 'permanent-error' });
    expect(w.queue.deadLetters).toHaveLength(1);
  });

  it('a completion removes a recorded cause (both stores)', async () => {
    expect(completeUpdate('jobs', lease(), { result: null, now: 1, expiresAt: 1 }).UpdateExpression).toMatch(
      /REMOVE #lastError, #lastErrorClass, #deadReason$/,
    );
    const store = new InMemoryJobStore();
    const claimed = await store.claim({
      dedupKey: KEY,
      owner: 'w',
      messageId: 'm',
      type: TYPE,
      createdAt: 'c',
      now: Date.now(),
      leaseMs: LEASE_MS,
    });
    if (!claimed.claimed) throw new Error('not claimed');
    await store.renew(claimed.lease, LEASE_MS, Date.now(), {
      deadLetter: { reason: 'permanent-error', errorClass: 'E', errorMessage: 'e' },
    });
    expect((await store.get(KEY))?.deadReason).toBe('permanent-error');
    await store.complete(claimed.lease, 'done');
    const item = await store.get(KEY);
    expect(item?.status).toBe(JobStatus.Completed);
    expect(item).not.toHaveProperty('deadReason');
  });
});

function lease(): JobLease {
  return { dedupKey: KEY, owner: 'w', token: 1, attempts: 1, messageId: 'm', version: 1, leaseUntil: 0 };
}
