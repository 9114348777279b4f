import type { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import type { EffectTables } from '../jobs/effect-tables.ts';
import { validatePayload } from '../jobs/standard-schema.ts';
import { type BackoffPolicy, backoffSeconds, DEFAULT_BACKOFF } from './backoff.ts';
import { decideRefusal } from './claim-decision.ts';
import type { CompletedCache } from './completed-cache.ts';
import { type JobEnvelope, parseEnvelope } from './envelope.ts';
import {
  DeadlineError,
  describe,
  errorClass,
  InvalidEnvelopeError,
  LeaseLostError,
  OptimisticConflictError,
  StoreUnavailableError,
} from './errors.ts';
import { Heartbeat } from './heartbeat.ts';
import { JobContext, namedLeaseLost } from './job-context.ts';
import type { DeadLetterReason, JobQueue } from './job-queue.ts';
import type { JobLease, JobStore } from './job-store.ts';
import type { LeaseStore } from './lease-store.ts';
import { capLeaseToDeadline, leaseTiming, visibilityForLease } from './lease-timing.ts';
import { type MetricsSink, noMetrics } from './metrics.ts';
import { conflictPause } from './optimistic.ts';
import type { AnyJobDefinition, JobRegistry } from './registry.ts';
import { MetricName } from './statuses.ts';

/** Settings of a {@link JobProcessor}; every default is applied in the constructor. */
export interface JobProcessorOptions {
  readonly store: JobStore;
  readonly queue: JobQueue;
  readonly registry: JobRegistry;
  /** This worker's id, stored as the lease owner and logged on every line. */
  readonly worker: string;
  readonly logger: Logger;
  /** @default noMetrics */
  readonly metrics?: MetricsSink;
  /** The application tables jobs reach as `ctx.tables`. @default none (a job that declares tables fails) */
  readonly tables?: EffectTables;
  /** Store of named leases behind `ctx.withLease`. @default none */
  readonly leases?: LeaseStore;
  /** Run test hooks carried in payloads (`ctx.testHooksEnabled`). @default false */
  readonly testHooks?: boolean;
  /** @default undefined (no local cache) */
  readonly cache?: CompletedCache;
  /** Job lease length. @default 30000 */
  readonly leaseMs?: number;
  /** Heartbeat period. @default leaseMs / 3 */
  readonly heartbeatMs?: number;
  /** Claims that ran the job before it is dead-lettered. @default 5 */
  readonly maxAttempts?: number;
  /** @default DEFAULT_BACKOFF (2 s base, 900 s cap) */
  readonly backoff?: BackoffPolicy;
  /** In-process tries of an optimistic completion before giving the job back. @default 3 */
  readonly optimisticTries?: number;
  /** Largest message body accepted. @default 262144 */
  readonly maxBodyBytes?: number;
  /** Injectable randomness for backoff jitter. @default Math.random */
  readonly random?: () => number;
  /** Injectable clock. @default Date.now */
  readonly now?: () => number;
}

/** What happened to one record; `retain` means the message stays in the queue (a batch item failure). */
export interface RecordOutcome {
  readonly messageId: string;
  readonly disposition: 'delete' | 'retain';
  readonly action:
    | 'completed'
    | 'duplicate'
    | 'dead-copy'
    | 'own-message-early'
    | 'contended'
    | 'retry'
    | 'dead-lettered'
    | 'lease-lost'
    | 'store-unavailable'
    | 'deadline'
    | 'deferred';
  readonly dedupKey?: string;
}

/** Per-call options of {@link JobProcessor.process}. */
export interface ProcessOptions {
  /** Epoch ms by which this record's work must be finished (the invocation's deadline less a margin). */
  readonly deadline?: number;
}

/**
 * Runs one SQS record through the protocol of docs/protocol.md: parse -> cache -> claim -> run under a
 * heartbeat -> fenced completion, or release with backoff, or dead-letter. It never throws: every
 * outcome, including store outages, becomes a {@link RecordOutcome}.
 */
export class JobProcessor {
  readonly #store: JobStore;
  readonly #queue: JobQueue;
  readonly #registry: JobRegistry;
  readonly #worker: string;
  readonly #logger: Logger;
  readonly #metrics: MetricsSink;
  readonly #tables: EffectTables | undefined;
  readonly #leases: LeaseStore | undefined;
  readonly #testHooks: boolean;
  readonly #cache: CompletedCache | undefined;
  readonly #leaseMs: number;
  readonly #heartbeatMs: number;
  readonly #maxAttempts: number;
  readonly #backoff: BackoffPolicy;
  readonly #optimisticTries: number;
  readonly #maxBodyBytes: number | undefined;
  readonly #random: () => number;
  readonly #now: () => number;

  constructor(options: JobProcessorOptions) {
    const timing = leaseTiming(options.leaseMs ?? 30_000, options.heartbeatMs);
    if (
      options.maxAttempts !== undefined &&
      !(Number.isInteger(options.maxAttempts) && options.maxAttempts >= 1)
    ) {
      throw new RangeError(`maxAttempts must be an integer >= 1, received ${options.maxAttempts}`);
    }
    this.#store = options.store;
    this.#queue = options.queue;
    this.#registry = options.registry;
    this.#worker = options.worker;
    this.#logger = options.logger;
    this.#metrics = options.metrics ?? noMetrics;
    this.#tables = options.tables;
    this.#leases = options.leases;
    this.#testHooks = options.testHooks ?? false;
    this.#cache = options.cache;
    this.#leaseMs = timing.leaseMs;
    this.#heartbeatMs = timing.heartbeatMs;
    this.#maxAttempts = options.maxAttempts ?? 5;
    this.#backoff = options.backoff ?? DEFAULT_BACKOFF;
    this.#optimisticTries = options.optimisticTries ?? 3;
    this.#maxBodyBytes = options.maxBodyBytes;
    this.#random = options.random ?? Math.random;
    this.#now = options.now ?? Date.now;
  }

  get worker(): string {
    return this.#worker;
  }

  /**
   * Hands back a record that was not started (a FIFO group stopped before it): visible again at once, so
   * its group resumes in order as soon as the failed head is retried. Never throws.
   */
  async defer(record: SQSRecord): Promise<RecordOutcome> {
    const log = new JobLog(this.#logger, { messageId: record.messageId, worker: this.#worker });
    log.info('not started: an earlier message of its FIFO group failed');
    await this.#giveBack(record, 0, log, 'fifo group stopped');
    return { messageId: record.messageId, action: 'deferred', disposition: 'retain' };
  }

  /** Processes one record; never throws. */
  async process(record: SQSRecord, options: ProcessOptions = {}): Promise<RecordOutcome> {
    const base = { messageId: record.messageId };
    let envelope: JobEnvelope;
    try {
      envelope = parseEnvelope(record.body, {
        ...(this.#maxBodyBytes === undefined ? {} : { maxBytes: this.#maxBodyBytes }),
        isKnownType: (type) => this.#registry.has(type),
      });
    } catch (error) {
      return this.#deadLetterUnclaimed(record, error);
    }
    const log = new JobLog(this.#logger, {
      dedupKey: envelope.dedupKey,
      messageId: record.messageId,
      worker: this.#worker,
      type: envelope.type,
      // The producer's W3C trace id, so one job can be followed from the send to its result.
      ...(envelope.trace ? { traceId: envelope.trace.split('-')[1] } : {}),
    });
    const outcome = (
      action: RecordOutcome['action'],
      disposition: RecordOutcome['disposition'],
    ): RecordOutcome => ({
      ...base,
      dedupKey: envelope.dedupKey,
      action,
      disposition,
    });

    if (this.#cache) {
      if (this.#cache.has(envelope.dedupKey)) {
        this.#metrics.count(MetricName.CacheHit);
        this.#metrics.count(MetricName.DuplicateSkipped);
        log.info('duplicate of a completed job (local cache): deleting this copy');
        return outcome('duplicate', 'delete');
      }
      this.#metrics.count(MetricName.CacheMiss);
    }

    const now = this.#now();
    const leaseMs = capLeaseToDeadline(this.#leaseMs, now, options.deadline);
    if (leaseMs < 1000) {
      await this.#giveBack(record, 0, log, 'too close to the invocation deadline to start');
      return outcome('deadline', 'retain');
    }

    let claim: Awaited<ReturnType<JobStore['claim']>>;
    const claimStarted = this.#now();
    try {
      claim = await this.#store.claim({
        dedupKey: envelope.dedupKey,
        owner: this.#worker,
        messageId: record.messageId,
        type: envelope.type,
        createdAt: envelope.createdAt,
        leaseMs,
        now,
      });
      this.#metrics.observe(MetricName.StoreLatency, this.#now() - claimStarted);
    } catch (error) {
      // Never run unguarded: whatever broke the claim, the message goes back with a backoff.
      const receives = Number(record.attributes.ApproximateReceiveCount ?? '1') || 1;
      const delay = backoffSeconds(receives, this.#backoff, this.#random);
      if (error instanceof StoreUnavailableError) {
        this.#metrics.count(MetricName.StoreUnavailable);
        log.warn('store unavailable: job not run; giving the message back', {
          delaySeconds: delay,
          error: describe(error),
        });
      } else {
        log.error(
          'claim failed (not an outage: check permissions and table names); giving the message back',
          {
            delaySeconds: delay,
            error: describe(error),
          },
        );
      }
      await this.#giveBack(record, delay, log, 'store unavailable');
      return outcome('store-unavailable', 'retain');
    }

    if (!claim.claimed) {
      const decision = decideRefusal(claim.existing, record.messageId, this.#now());
      const refusal = {
        status: claim.existing.status,
        owner: claim.existing.owner,
        token: claim.existing.token,
      };
      switch (decision.kind) {
        case 'duplicate-completed':
          this.#cache?.add(envelope.dedupKey);
          this.#metrics.count(MetricName.DuplicateSkipped);
          log.info('duplicate of a completed job: deleting this copy', refusal);
          return outcome('duplicate', 'delete');
        case 'duplicate-racing':
          this.#metrics.count(MetricName.DuplicateSkipped);
          log.info('another message holds this job: deleting this copy', refusal);
          return outcome('duplicate', 'delete');
        case 'dead-copy':
          this.#metrics.count(MetricName.DeadCopyDropped);
          log.warn(
            'copy of a dead-lettered job: deleting it (redrive from the DLQ to run it again)',
            refusal,
          );
          return outcome('dead-copy', 'delete');
        case 'own-message-early': {
          this.#metrics.count(MetricName.OwnMessageEarly);
          const seconds = Math.ceil(decision.hideForMs / 1000) + 1;
          log.info('own message back while its lease runs: hiding it until the lease ends', {
            ...refusal,
            hideSeconds: seconds,
          });
          await this.#giveBack(record, seconds, log, 'own message early');
          return outcome('own-message-early', 'retain');
        }
        case 'contended':
          await this.#giveBack(record, 1, log, 'claim refused by a lease that just ended');
          return outcome('contended', 'retain');
      }
    }

    const lease = claim.lease;
    log.setKeys({ attempt: lease.attempts, token: lease.token });
    if (claim.kind === 'takeover') {
      this.#metrics.count(MetricName.LeaseExpired);
      log.warn('took over a job whose lease expired; resuming from its checkpoint', {
        previousOwner: claim.previous?.owner,
        checkpoint: lease.checkpoint?.step,
      });
    }
    if (lease.attempts > this.#maxAttempts) {
      const last = claim.previous;
      return this.#deadLetterClaimed(record, envelope, lease, log, {
        reason: 'max-attempts',
        errorClass: last?.lastErrorClass ?? 'LeaseExpired',
        errorMessage: last?.lastError ?? 'attempts exhausted (the last attempt lost its lease)',
      });
    }
    return this.#run(record, envelope, lease, leaseMs, options.deadline, log, outcome);
  }

  async #run(
    record: SQSRecord,
    envelope: JobEnvelope,
    lease: JobLease,
    leaseMs: number,
    deadline: number | undefined,
    log: JobLog,
    outcome: (action: RecordOutcome['action'], disposition: RecordOutcome['disposition']) => RecordOutcome,
  ): Promise<RecordOutcome> {
    const started = this.#now();
    const definition = this.#registry.get(envelope.type);
    if (!definition) throw new Error(`unreachable: ${envelope.type} passed parse but is not registered`);

    let visibilityWarned = false;
    const heartbeat = new Heartbeat({
      intervalMs: Math.min(this.#heartbeatMs, Math.max(100, Math.floor(leaseMs / 3))),
      leaseUntil: lease.leaseUntil,
      now: this.#now,
      target: {
        renew: async () => {
          const now = this.#now();
          const ms = capLeaseToDeadline(this.#leaseMs, now, deadline);
          if (ms <= 0) throw new LeaseLostError(lease.dedupKey, lease.token, 'invocation deadline reached');
          await this.#store.renew(lease, ms, now);
          // The fenced DynamoDB renewal is the lease. The visibility only keeps our message from coming
          // back early; if it cannot be extended (our message was received again, so this receipt is
          // stale, or SQS failed), the copy that comes back finds our live lease and is hidden again.
          // Neither aborts a job that holds its lease.
          try {
            await this.#queue.changeVisibility(record.receiptHandle, visibilityForLease(ms));
          } catch (error) {
            if (!visibilityWarned) {
              visibilityWarned = true;
              log.warn('could not extend the message visibility; the lease holds and the job goes on', {
                error: describe(error),
                receiptStale: isReceiptGone(error),
              });
            }
          }
          return lease.leaseUntil;
        },
      },
      onRenewed: (until) => {
        this.#metrics.count(MetricName.LeaseRenewed);
        log.debug('lease renewed', { leaseUntil: until });
      },
      onRenewFailed: (error) =>
        log.warn('lease renewal failed; will retry next beat', { error: describe(error) }),
      // Counted once, where the failure is handled.
      onLost: (error) => log.warn('lease lost: aborting the job', { error: describe(error) }),
    }).start();

    const deadlineController = new AbortController();
    const deadlineTimer =
      deadline === undefined
        ? undefined
        : setTimeout(
            () => deadlineController.abort(new DeadlineError('invocation deadline near')),
            deadline - started,
          );
    deadlineTimer?.unref?.();
    const signal = AbortSignal.any([heartbeat.signal, deadlineController.signal]);

    try {
      await this.#runAndCommit(definition, envelope, lease, signal, log);
    } catch (thrown) {
      await heartbeat.stop();
      const error =
        signal.aborted && !(thrown instanceof LeaseLostError) ? (signal.reason ?? thrown) : thrown;
      return this.#handleFailure(record, envelope, lease, error, log, outcome);
    } finally {
      await heartbeat.stop();
      if (deadlineTimer) clearTimeout(deadlineTimer);
    }
    // Committed: nothing below may turn the job into a failure.
    return this.#completed(envelope, started, log, outcome);
  }

  /** Validates the payload, runs the job and commits it fenced; optimistic conflicts re-run it a few times. */
  async #runAndCommit(
    definition: AnyJobDefinition,
    envelope: JobEnvelope,
    lease: JobLease,
    signal: AbortSignal,
    log: JobLog,
  ): Promise<void> {
    const parsed = await validatePayload(definition.payload, envelope.payload);
    if (!parsed.ok) throw new InvalidEnvelopeError('bad-payload', parsed.problem);
    const context = new JobContext({
      tables: this.#tables?.for(definition) ?? {},
      ...(this.#leases ? { leases: this.#leases } : {}),
      testHooks: this.#testHooks,
      store: this.#store,
      lease,
      signal,
      worker: this.#worker,
      metrics: this.#metrics,
      optimisticTries: this.#optimisticTries,
      random: this.#random,
      now: this.#now,
    });
    try {
      await this.#commitLoop(definition, context, parsed.value, lease, signal, log);
    } finally {
      // Named leases a job took are held until here, so its commit was fenced by them.
      await context.releaseLeases();
    }
  }

  async #commitLoop(
    definition: AnyJobDefinition,
    context: JobContext,
    payload: unknown,
    lease: JobLease,
    signal: AbortSignal,
    log: JobLog,
  ): Promise<void> {
    for (let tryNumber = 1; ; tryNumber++) {
      const result = (await abortable(definition.run(context, payload), signal)) || undefined;
      signal.throwIfAborted();
      const effects = result?.effects ?? [];
      const fenced = effects.length > 0 ? [...effects, ...context.leaseFences()] : effects;
      const commit = await this.#store.complete(lease, result?.result, fenced);
      if (commit.ok) return;
      const lost = context.lostLeaseAt(commit, effects.length);
      if (lost) throw namedLeaseLost(lost, 'completion');
      this.#metrics.count(MetricName.OptimisticConflict);
      log.info('completion hit an optimistic conflict; re-reading and retrying', { try: tryNumber });
      if (tryNumber >= this.#optimisticTries) throw new OptimisticConflictError('completion', tryNumber);
      await conflictPause(tryNumber, this.#random);
    }
  }

  #completed(
    envelope: JobEnvelope,
    started: number,
    log: JobLog,
    outcome: (action: RecordOutcome['action'], disposition: RecordOutcome['disposition']) => RecordOutcome,
  ): RecordOutcome {
    this.#cache?.add(envelope.dedupKey);
    const duration = this.#now() - started;
    this.#metrics.count(MetricName.JobSucceeded);
    this.#metrics.count(MetricName.JobsPerWorker, 1, { worker: this.#worker });
    this.#metrics.observe(MetricName.JobDuration, duration);
    this.#metrics.observe(MetricName.QueueLag, this.#now() - Date.parse(envelope.createdAt));
    log.info('job completed', { durationMs: duration });
    return outcome('completed', 'delete');
  }

  async #handleFailure(
    record: SQSRecord,
    envelope: JobEnvelope,
    lease: JobLease,
    error: unknown,
    log: JobLog,
    outcome: (action: RecordOutcome['action'], disposition: RecordOutcome['disposition']) => RecordOutcome,
  ): Promise<RecordOutcome> {
    if (error instanceof LeaseLostError) {
      if (error.completedByThisLease) {
        log.info('the commit had gone through (its answer was lost): the job is done');
        this.#cache?.add(envelope.dedupKey);
        this.#metrics.count(MetricName.JobSucceeded);
        return outcome('completed', 'delete');
      }
      // Another worker owns the job now (or will, once the lease ends). Our receipt handle may be stale,
      // so we neither delete nor touch the message; our writes were refused by the fence.
      this.#metrics.count(MetricName.LeaseLost);
      log.warn('lease lost; leaving the job to its new owner', { error: describe(error) });
      return outcome('lease-lost', 'retain');
    }
    const permanent = error instanceof Error && 'retryable' in error && error.retryable === false;
    if (permanent) {
      return this.#deadLetterClaimed(record, envelope, lease, log, {
        reason: error instanceof InvalidEnvelopeError ? `invalid-${error.problem}` : 'permanent-error',
        errorClass: errorClass(error),
        errorMessage: describe(error),
      });
    }
    // A store outage is not the job's failure: it neither uses up an attempt nor dead-letters the job.
    const outage = error instanceof StoreUnavailableError;
    if (outage) this.#metrics.count(MetricName.StoreUnavailable);
    if (!outage && lease.attempts >= this.#maxAttempts) {
      return this.#deadLetterClaimed(record, envelope, lease, log, {
        reason: 'max-attempts',
        errorClass: errorClass(error),
        errorMessage: describe(error),
      });
    }
    const delay =
      error instanceof DeadlineError ? 0 : backoffSeconds(lease.attempts, this.#backoff, this.#random);
    this.#metrics.count(MetricName.JobRetried);
    log.warn('attempt failed; releasing the lease and retrying after a backoff', {
      reason: errorClass(error),
      error: describe(error),
      delaySeconds: delay,
      checkpoint: lease.checkpoint?.step,
      attemptsLeft: this.#maxAttempts - lease.attempts,
    });
    try {
      await this.#store.release(
        lease,
        this.#now() + delay * 1000,
        { message: describe(error), errorClass: errorClass(error) },
        { refundAttempt: outage },
      );
    } catch (releaseError) {
      if (releaseError instanceof LeaseLostError && releaseError.completedByThisLease) {
        log.info('the commit had gone through (its answer was lost): the job is done');
        this.#cache?.add(envelope.dedupKey);
        this.#metrics.count(MetricName.JobSucceeded);
        return outcome('completed', 'delete');
      }
      if (releaseError instanceof LeaseLostError) {
        log.warn('lease lost while releasing; leaving the job to its new owner', {
          error: describe(releaseError),
        });
        return outcome('lease-lost', 'retain');
      }
      // The lease will simply expire; the message comes back after the backoff and takes it over.
      log.warn('could not release the lease; it will expire instead', { error: describe(releaseError) });
    }
    await this.#giveBack(record, delay, log, errorClass(error));
    return outcome(error instanceof DeadlineError ? 'deadline' : 'retry', 'retain');
  }

  async #deadLetterClaimed(
    record: SQSRecord,
    envelope: JobEnvelope,
    lease: JobLease,
    log: JobLog,
    why: { reason: string; errorClass: string; errorMessage: string },
  ): Promise<RecordOutcome> {
    const reason: DeadLetterReason = {
      ...why,
      attempts: lease.attempts,
      dedupKey: envelope.dedupKey,
      worker: this.#worker,
      messageId: record.messageId,
      type: envelope.type,
    };
    const base = { messageId: record.messageId, dedupKey: envelope.dedupKey };
    // Each step below that fails keeps the message: it is what brings the job back.
    const lost = (error: unknown, message: string): RecordOutcome => {
      this.#metrics.count(MetricName.LeaseLost);
      log.warn(message, { error: describe(error) });
      return { ...base, action: 'lease-lost', disposition: 'retain' };
    };
    const keep = async (error: unknown, message: string, action: RecordOutcome['action']) => {
      if (error instanceof StoreUnavailableError) this.#metrics.count(MetricName.StoreUnavailable);
      log.warn(message, { error: describe(error) });
      await this.#giveBack(record, backoffSeconds(lease.attempts, this.#backoff, this.#random), log, message);
      return { ...base, action, disposition: 'retain' } as const;
    };
    // Fence before anything leaves: a fenced renewal proves this worker still holds the job (and keeps
    // it for the next steps). A worker that lost its lease unknowingly sends no letter for a job that
    // its new owner may well complete.
    try {
      await this.#store.renew(lease, this.#leaseMs, this.#now());
    } catch (error) {
      if (error instanceof LeaseLostError) {
        return lost(
          error,
          'lease lost before dead-lettering; no letter sent, the job is left to its new owner',
        );
      }
      return keep(
        error,
        'could not confirm the lease before dead-lettering; keeping the message',
        'store-unavailable',
      );
    }
    try {
      await this.#queue.sendToDeadLetter(record.body, reason, record.attributes.MessageGroupId);
    } catch (error) {
      return keep(error, 'could not send to the DLQ; keeping the message for a retry', 'retry');
    }
    try {
      await this.#store.markDead(lease, { message: why.errorMessage, errorClass: why.errorClass });
    } catch (error) {
      // Someone else owns (or finished) the job now: the letter just sent is stale, and `dlq redrive`
      // skips a job that completed or runs.
      if (error instanceof LeaseLostError) {
        return lost(error, 'lease lost while dead-lettering; keeping the message for the new owner');
      }
      // The letter is out but the item is not DEAD: deleting the original now would leave an unfinished
      // item with no message to bring it back. Its next delivery finishes the dead-lettering (a second
      // letter for the same job is possible: the DLQ is at-least-once), and a redrive resets it too.
      return keep(
        error,
        'dead-lettered but could not mark the job item DEAD; keeping the message',
        'store-unavailable',
      );
    }
    await this.#deleteQuietly(record, log);
    this.#metrics.count(MetricName.JobDeadLettered);
    log.error('job dead-lettered', {
      reason: why.reason,
      errorClass: why.errorClass,
      error: why.errorMessage,
    });
    return { ...base, action: 'dead-lettered', disposition: 'delete' };
  }

  async #deadLetterUnclaimed(record: SQSRecord, error: unknown): Promise<RecordOutcome> {
    const log = new JobLog(this.#logger, { messageId: record.messageId, worker: this.#worker });
    const problem = error instanceof InvalidEnvelopeError ? error.problem : 'bad-schema';
    const reason: DeadLetterReason = {
      reason: `invalid-${problem}`,
      errorClass: errorClass(error),
      errorMessage: describe(error),
      attempts: 0,
      worker: this.#worker,
      messageId: record.messageId,
      ...(dedupKeyHint(record.body) === undefined ? {} : { dedupKey: dedupKeyHint(record.body) }),
    };
    try {
      await this.#queue.sendToDeadLetter(record.body, reason, record.attributes.MessageGroupId);
    } catch (sendError) {
      log.error('bad message, and the DLQ send failed; keeping it for a retry', {
        error: describe(sendError),
      });
      await this.#giveBack(record, backoffSeconds(2, this.#backoff, this.#random), log, 'dlq send failed');
      return { messageId: record.messageId, action: 'retry', disposition: 'retain' };
    }
    await this.#deleteQuietly(record, log);
    this.#metrics.count(MetricName.JobDeadLettered);
    log.error('bad message dead-lettered', { reason: reason.reason, error: reason.errorMessage });
    return { messageId: record.messageId, action: 'dead-lettered', disposition: 'delete' };
  }

  async #giveBack(record: SQSRecord, seconds: number, log: JobLog, why: string): Promise<void> {
    try {
      await this.#queue.changeVisibility(record.receiptHandle, seconds);
    } catch (error) {
      // The message reappears when its current visibility ends; nothing is lost.
      log.warn('could not set the message visibility', { why, error: describe(error) });
    }
  }

  async #deleteQuietly(record: SQSRecord, log: JobLog): Promise<void> {
    try {
      await this.#queue.delete(record.receiptHandle);
    } catch (error) {
      log.warn('could not delete the original message; a later copy will be dropped', {
        error: describe(error),
      });
    }
  }
}

/** Log lines of one job, each carrying the job's keys. */
class JobLog {
  readonly #logger: Logger;
  #keys: Record<string, unknown>;

  constructor(logger: Logger, keys: Record<string, unknown>) {
    this.#logger = logger;
    this.#keys = keys;
  }
  setKeys(keys: Record<string, unknown>): void {
    this.#keys = { ...this.#keys, ...keys };
  }
  debug(message: string, extra: Record<string, unknown> = {}): void {
    this.#logger.debug(message, { ...this.#keys, ...extra });
  }
  info(message: string, extra: Record<string, unknown> = {}): void {
    this.#logger.info(message, { ...this.#keys, ...extra });
  }
  warn(message: string, extra: Record<string, unknown> = {}): void {
    this.#logger.warn(message, { ...this.#keys, ...extra });
  }
  error(message: string, extra: Record<string, unknown> = {}): void {
    this.#logger.error(message, { ...this.#keys, ...extra });
  }
}

const RECEIPT_GONE = new Set(['ReceiptHandleIsInvalid', 'MessageNotInflight', 'InvalidParameterValue']);
function isReceiptGone(error: unknown): boolean {
  return error instanceof Error && RECEIPT_GONE.has(error.name);
}

/** Resolves with the job's result, or rejects as soon as `signal` aborts (the job keeps running, fenced). */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** The dedup key of a bad message when one can be read, for the dead letter's attributes. */
function dedupKeyHint(body: string): string | undefined {
  try {
    const raw: unknown = JSON.parse(body);
    if (typeof raw === 'object' && raw !== null && 'dedupKey' in raw && typeof raw.dedupKey === 'string') {
      return raw.dedupKey.slice(0, 256);
    }
  } catch {
    // not JSON: no key to report
  }
  return undefined;
}
