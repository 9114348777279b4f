import type { Logger } from '@aws-lambda-powertools/logger';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import type { SQSRecord } from 'aws-lambda';
import {
  describe,
  errorClass,
  FastPathNeedsLeaseError,
  InvalidEnvelopeError,
  LeaseLostError,
  LeaseRanOutError,
  OptimisticConflictError,
  StoreUnavailableError,
} from '../../errors.ts';
import { type JobEnvelope, parseEnvelope } from '../contract/envelope.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { JobQueue } from '../contract/job-queue.ts';
import type {
  ClaimResult,
  Effect,
  FastCommitResult,
  FencedWriteResult,
  JobLease,
  JobStore,
} from '../contract/job-store.ts';
import type { LeaseStore } from '../contract/lease-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { type BackoffPolicy, backoffSeconds, DEFAULT_BACKOFF } from '../decisions/backoff.ts';
import { decideRefusal, needsLeasedClaim } from '../decisions/claim-decision.ts';
import { decideFailure, type FailureDecision } from '../decisions/failure-decision.ts';
import {
  capLeaseToDeadline,
  leaseSafetyMs,
  leaseTiming,
  visibilityForLease,
} from '../decisions/lease-timing.ts';
import { conflictPause } from '../decisions/optimistic.ts';
import { Heartbeat } from '../leases/heartbeat.ts';
import { JobRenewer } from '../leases/renewer.ts';
import { boundedSignal } from '../leases/timeout-signal.ts';
import { JobContext, namedLeaseLost } from '../model/job-context.ts';
import type { AnyJobDefinition, TableHandleSource } from '../model/job-definition.ts';
import type { JobRegistry } from '../model/registry.ts';
import { validatePayload } from '../model/standard-schema.ts';
import { JobLog } from '../observe/job-log.ts';
import { MetricName } from '../observe/metric-names.ts';
import { type MetricsSink, noMetrics } from '../observe/metrics.ts';
import { contextFromTraceparent, inSpan, SpanKind } from '../observe/spans.ts';
import type { CompletedCache } from './completed-cache.ts';
import { DeadLetterer } from './dead-letterer.ts';
import { RecordMessage } from './record-message.ts';

/** Longest batch: Lambda's (and the local runner's) timeout maximum, 15 min. */
const MAX_BATCH_SECONDS = 900;

/** One record on its way through the pipeline: its message, its parsed envelope, its log. */
interface Job {
  readonly message: RecordMessage;
  readonly envelope: JobEnvelope;
  readonly log: JobLog;
}

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
  readonly tables?: TableHandleSource;
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
    | 'lease-ran-out'
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
  readonly #tables: TableHandleSource | undefined;
  readonly #leases: LeaseStore | undefined;
  readonly #testHooks: boolean;
  readonly #cache: CompletedCache | undefined;
  readonly #leaseMs: number;
  readonly #heartbeatMs: number;
  readonly #maxAttempts: number;
  readonly #backoff: BackoffPolicy;
  readonly #optimisticTries: number;
  readonly #maxBodyBytes: number | undefined;
  /** What parseEnvelope checks every body against: built once, not per record. */
  readonly #parseOptions: { readonly maxBytes?: number; readonly isKnownType: (type: string) => boolean };
  readonly #random: () => number;
  readonly #now: () => number;
  readonly #deadLetterer: DeadLetterer;

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
    this.#parseOptions = {
      ...(this.#maxBodyBytes === undefined ? {} : { maxBytes: this.#maxBodyBytes }),
      isKnownType: (type) => this.#registry.has(type),
    };
    this.#random = options.random ?? Math.random;
    this.#now = options.now ?? Date.now;
    this.#deadLetterer = new DeadLetterer({
      store: this.#store,
      queue: this.#queue,
      metrics: this.#metrics,
      worker: this.#worker,
      backoffSeconds: (attempts) => backoffSeconds(attempts, this.#backoff, this.#random),
      callBudgetMs: this.#leaseMs,
    });
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
    this.#metrics.count(MetricName.HandBack);
    await new RecordMessage(this.#queue, record, log).giveBack(0, 'fifo group stopped');
    return { messageId: record.messageId, action: 'deferred', disposition: 'retain' };
  }

  /**
   * Processes one record; never throws. The pipeline of docs/protocol.md: parse, local cache, claim (or
   * act on its refusal), run under the heartbeat, then commit, or the failure decision's retry or dead
   * letter.
   */
  async process(record: SQSRecord, options: ProcessOptions = {}): Promise<RecordOutcome> {
    const keys = { messageId: record.messageId, worker: this.#worker };
    let envelope: JobEnvelope;
    try {
      envelope = parseEnvelope(record.body, this.#parseOptions);
    } catch (error) {
      const log = new JobLog(this.#logger, keys);
      const done = await this.#deadLetterer.unclaimed(
        new RecordMessage(this.#queue, record, log),
        error,
        log,
      );
      return { messageId: record.messageId, ...done };
    }
    const log = new JobLog(this.#logger, {
      dedupKey: envelope.dedupKey,
      ...keys,
      type: envelope.type,
      // The producer's W3C trace id, so one job can be followed from the send to its result.
      ...(envelope.trace ? { traceId: envelope.trace.split('-')[1] } : {}),
    });
    const job: Job = { message: new RecordMessage(this.#queue, record, log), envelope, log };
    // One span per record, a child of the producer's: the trace runs from the send to the result.
    return inSpan(
      `leaseq.process ${envelope.type}`,
      {
        'messaging.system': 'aws_sqs',
        'messaging.operation.type': 'process',
        'messaging.message.id': record.messageId,
        'leaseq.job.type': envelope.type,
      },
      async (span) => {
        const outcome = await this.#processJob(job, options);
        span.setAttribute('leaseq.outcome', outcome.action);
        if (outcome.action === 'dead-lettered')
          span.setStatus({ code: SpanStatusCode.ERROR, message: 'dead-lettered' });
        return outcome;
      },
      { parent: contextFromTraceparent(envelope.trace), kind: SpanKind.CONSUMER },
    );
  }

  /** The pipeline after parsing: cache, claim (or its refusal), run, commit or the failure decision. */
  async #processJob(job: Job, options: ProcessOptions): Promise<RecordOutcome> {
    const { envelope, log } = job;
    this.#metrics.count(MetricName.MessageReceived);
    const record = job.message.record;
    const outcome = (action: RecordOutcome['action'], disposition: RecordOutcome['disposition']) =>
      ({ messageId: record.messageId, dedupKey: envelope.dedupKey, action, disposition }) as const;

    if (this.#cache) {
      if (this.#cache.has(envelope.dedupKey)) {
        this.#metrics.count(MetricName.CacheHit);
        this.#metrics.count(MetricName.DuplicateSkipped, 1, byType(envelope));
        log.info('duplicate of a completed job (local cache): deleting this copy');
        return outcome('duplicate', 'delete');
      }
      this.#metrics.count(MetricName.CacheMiss);
    }

    let now = this.#now();
    let leaseMs = capLeaseToDeadline(this.#leaseMs, now, options.deadline);
    if (leaseMs < 1000) return outcome(await this.#tooLate(job), 'retain');

    const definition = this.#registry.get(envelope.type);
    if (!definition) throw new Error(`unreachable: ${envelope.type} passed parse but is not registered`);
    // The fast path takes first receives only: a redelivery (a failed attempt, a dead worker, a run past
    // its budget) runs leased, with the heartbeat, checkpoints and the attempt count.
    let failure: { readonly error: unknown } | undefined;
    if (definition.fastPath === true && record.attributes.ApproximateReceiveCount === '1') {
      const fast = await this.#fast(job, definition, leaseMs, now);
      if ('action' in fast) return outcome(fast.action, dispositionOf(fast.action));
      if ('error' in fast) failure = fast;
      this.#metrics.count(MetricName.FastPathFallback, 1, byType(envelope));
      // The claim below starts now, and its lease is capped to the deadline from now.
      now = this.#now();
      leaseMs = capLeaseToDeadline(this.#leaseMs, now, options.deadline);
      if (leaseMs < 1000) return outcome(await this.#tooLate(job), 'retain');
    }

    const claim = await this.#claim(job, leaseMs, now);
    if (claim === undefined) return outcome('store-unavailable', 'retain');
    if (!claim.claimed) {
      const action = await this.#refused(job, claim.existing);
      return outcome(action, dispositionOf(action));
    }

    const lease = claim.lease;
    // A fast attempt that failed was counted when it started; this claim only records its failure.
    if (!failure) this.#metrics.count(MetricName.JobClaimed);
    log.setKeys({ attempt: lease.attempts, token: lease.token });
    trace.getActiveSpan()?.setAttributes({ 'leaseq.attempt': lease.attempts, 'leaseq.token': lease.token });
    if (claim.kind === 'takeover') {
      this.#metrics.count(MetricName.LeaseExpired);
      log.warn('took over a job whose lease expired; resuming from its checkpoint', {
        previousOwner: claim.previous?.owner,
        checkpoint: lease.checkpoint?.step,
      });
    }
    const renewer = new JobRenewer({
      store: this.#store,
      queue: this.#queue,
      lease,
      receiptHandle: record.receiptHandle,
      leaseMs: this.#leaseMs,
      ...(options.deadline === undefined ? {} : { deadline: options.deadline }),
      log,
      now: this.#now,
    });
    if (lease.attempts > this.#maxAttempts) {
      // The last attempt ended without releasing (its worker died or lost the lease): no run is left.
      const last = claim.previous;
      const done = await this.#deadLetterer.claimed(job.message, envelope, lease, renewer, log, {
        reason: 'max-attempts',
        errorClass: last?.lastErrorClass ?? 'LeaseExpired',
        errorMessage: last?.lastError ?? 'attempts exhausted (the last attempt lost its lease)',
      });
      return outcome(done.action, done.disposition);
    }
    if (failure) {
      // The fast attempt failed before anything was written: its failure is decided under this lease.
      const decision = decideFailure(failure.error, {
        attempts: lease.attempts,
        maxAttempts: this.#maxAttempts,
        backoffSeconds: (attempts) => backoffSeconds(attempts, this.#backoff, this.#random),
      });
      const action = await this.#afterFailure(job, lease, renewer, failure.error, decision);
      return outcome(action, dispositionOf(action));
    }
    const action = await this.#run(job, definition, lease, renewer, leaseMs, now, options.deadline);
    return outcome(action, dispositionOf(action));
  }

  /** Gives the message back at once: too little of the invocation is left to start (or go on). */
  async #tooLate(job: Job): Promise<'deadline'> {
    this.#metrics.count(MetricName.HandBack);
    await job.message.giveBack(0, 'too close to the invocation deadline to start');
    return 'deadline';
  }

  /**
   * The fast path (docs/protocol.md, "Fast path"): run the job with no claim, then commit its effects
   * and the completion in one write under the claim's condition. The run and the commit get the time a
   * lease would. Ends the record (an action: committed, refused as a copy, the commit's answer unknown,
   * or the run outlasted its budget and M goes back to run leased), or asks for a leased run now
   * (`leased`: the job needs a lease, or has a checkpoint), or hands back the error of a failed run,
   * which the caller records under a lease (nothing was written either way).
   */
  async #fast(
    job: Job,
    definition: AnyJobDefinition,
    leaseMs: number,
    started: number,
  ): Promise<
    { readonly action: RecordOutcome['action'] } | { readonly error: unknown } | { readonly leased: true }
  > {
    const { envelope, message, log } = job;
    this.#metrics.count(MetricName.JobClaimed);
    const budget = leaseMs - leaseSafetyMs(leaseMs);
    const bound = boundedSignal(budget, 'the fast path has the time of one lease');
    let result: FastCommitResult;
    try {
      result = await this.#fastRunAndCommit(job, definition, started + budget, bound.signal);
    } catch (thrown) {
      if (thrown instanceof StoreUnavailableError)
        return { action: await this.#fastCommitUnknown(job, thrown) };
      if (thrown instanceof FastPathNeedsLeaseError) {
        log.info('the job needs a lease: running it leased', { error: describe(thrown) });
        return { leased: true };
      }
      if (bound.signal.aborted) {
        // Nothing was written and the job did not fail: its redelivery runs leased, with the heartbeat.
        this.#metrics.count(MetricName.HandBack);
        log.info('the fast run outlasted one lease; giving the message back to run leased', {
          budgetMs: budget,
        });
        await message.giveBack(0, 'fast run past its budget');
        return { action: 'deadline' };
      }
      log.info('fast attempt failed; recording it under a lease', { error: describe(thrown) });
      return { error: thrown };
    } finally {
      bound.clear();
    }
    if (result.ok) {
      this.#completed(envelope, started, log);
      return { action: 'completed' };
    }
    if (result.reason === 'refused') {
      // Claim it now rather than hand M back to come round again.
      if (needsLeasedClaim(result.existing, this.#maxAttempts, this.#now())) return { leased: true };
      return { action: await this.#refused(job, result.existing) };
    }
    // Optimistic conflicts the re-runs did not resolve.
    return { error: new OptimisticConflictError('completion', this.#optimisticTries) };
  }

  /** Runs the job and tries its one-write commit; an optimistic conflict re-runs it a few times. */
  async #fastRunAndCommit(
    job: Job,
    definition: AnyJobDefinition,
    until: number,
    signal: AbortSignal,
  ): Promise<FastCommitResult> {
    const { envelope, message, log } = job;
    const parsed = await validatePayload(definition.payload, envelope.payload);
    if (!parsed.ok) throw new InvalidEnvelopeError('bad-payload', parsed.problem);
    const lease: JobLease = {
      dedupKey: envelope.dedupKey,
      owner: this.#worker,
      token: 0,
      attempts: 1,
      messageId: message.record.messageId,
      version: 0,
      leaseUntil: until,
    };
    const context = new JobContext({
      tables: this.#tables?.for(definition) ?? {},
      testHooks: this.#testHooks,
      store: this.#store,
      lease,
      signal,
      fastPath: true,
      worker: this.#worker,
      metrics: this.#metrics,
      optimisticTries: this.#optimisticTries,
      random: this.#random,
      now: this.#now,
    });
    for (let tryNumber = 1; ; tryNumber++) {
      const outcome = (await abortable(definition.run(context, parsed.value), signal)) || undefined;
      signal.throwIfAborted();
      const result = await inSpan('leaseq.commit', { 'leaseq.fast_path': true }, () =>
        this.#store.claimAndComplete(
          {
            dedupKey: envelope.dedupKey,
            owner: this.#worker,
            messageId: message.record.messageId,
            type: envelope.type,
            createdAt: envelope.createdAt,
            now: this.#now(),
            maxAttempts: this.#maxAttempts,
          },
          outcome?.result,
          outcome?.effects ?? [],
          { signal },
        ),
      );
      if (result.ok || result.reason === 'refused') return result;
      this.#metrics.count(MetricName.OptimisticConflict);
      log.info('fast commit hit an optimistic conflict; re-reading and retrying', { try: tryNumber });
      if (tryNumber >= this.#optimisticTries) return result;
      await conflictPause(tryNumber, this.#random);
    }
  }

  /**
   * A fast commit whose answer is unknown (an outage, or abandoned at its bound): one read tells. A
   * COMPLETED job is done, whoever's write did it: the copy is deleted. Otherwise the message goes back
   * with a backoff; nothing was claimed, so nothing needs releasing.
   */
  async #fastCommitUnknown(job: Job, error: StoreUnavailableError): Promise<RecordOutcome['action']> {
    const { envelope, message, log } = job;
    const bound = boundedSignal(Math.max(1000, leaseSafetyMs(this.#leaseMs)), 'commit check');
    try {
      const item = await this.#store.get(envelope.dedupKey, { signal: bound.signal });
      if (item?.status === JobStatus.Completed) {
        this.#cache?.add(envelope.dedupKey);
        if (item.owner === this.#worker && item.messageId === message.record.messageId) {
          log.info('the fast commit went through though its answer was lost');
          this.#metrics.count(MetricName.JobSucceeded, 1, byType(envelope));
          return 'completed';
        }
        log.info('the fast commit answer was lost; another copy completed the job: deleting this copy');
        this.#metrics.count(MetricName.DuplicateSkipped, 1, byType(envelope));
        return 'duplicate';
      }
    } catch {
      // Still unknown: the message comes back, and its next receive (leased) tells.
    } finally {
      bound.clear();
    }
    const delay = backoffSeconds(message.receives, this.#backoff, this.#random);
    this.#metrics.count(MetricName.StoreUnavailable);
    this.#metrics.count(MetricName.HandBack);
    log.warn('store unavailable at the fast commit; giving the message back', {
      delaySeconds: delay,
      error: describe(error),
    });
    await message.giveBack(delay, 'store unavailable');
    return 'store-unavailable';
  }

  /**
   * The claim (protocol edges E1/E2), bounded by the lease it asks for: an answer that would come after
   * the lease ended is abandoned, and the message goes back with a backoff. Undefined when it failed.
   */
  async #claim(job: Job, leaseMs: number, now: number): Promise<ClaimResult | undefined> {
    const { envelope, message, log } = job;
    const bound = boundedSignal(leaseMs - leaseSafetyMs(leaseMs), 'the claim would outlast its lease');
    try {
      const claim = await inSpan('leaseq.claim', {}, () =>
        this.#store.claim(
          {
            dedupKey: envelope.dedupKey,
            owner: this.#worker,
            messageId: message.record.messageId,
            type: envelope.type,
            createdAt: envelope.createdAt,
            leaseMs,
            now,
          },
          { signal: bound.signal },
        ),
      );
      return claim;
    } catch (error) {
      // Never run unguarded: whatever broke the claim, the message goes back with a backoff.
      const delay = backoffSeconds(message.receives, this.#backoff, this.#random);
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
      this.#metrics.count(MetricName.HandBack);
      await message.giveBack(delay, 'store unavailable');
      return undefined;
    } finally {
      bound.clear();
    }
  }

  /** Acts on a refused claim (claim-decision.ts) and names the outcome. */
  async #refused(job: Job, existing: JobItem): Promise<RecordOutcome['action']> {
    const { envelope, message, log } = job;
    const decision = decideRefusal(existing, message.record.messageId, this.#now());
    const refusal = { status: existing.status, owner: existing.owner, token: existing.token };
    switch (decision.kind) {
      case 'duplicate-completed':
        this.#cache?.add(envelope.dedupKey);
        this.#metrics.count(MetricName.DuplicateSkipped, 1, byType(envelope));
        log.info('duplicate of a completed job: deleting this copy', refusal);
        return 'duplicate';
      case 'duplicate-racing': {
        // The job is unfinished and another message guards it. This copy is deleted when its batch ends
        // (by the event source); until then it must not show again, or it could become the job's guard
        // and then be deleted by that late delete, stranding the job. So hide it past any batch (and a
        // slow delete) first; never shorter than a receive gave it. If that fails, keep it: it comes back
        // and is judged again.
        const hide = MAX_BATCH_SECONDS + visibilityForLease(this.#leaseMs);
        if (!(await job.message.hide(hide))) {
          log.info('another message holds this job; could not hide this copy, keeping it', refusal);
          return 'contended';
        }
        // Hidden, it is safe to delete now rather than hold it in flight until the batch ends (the
        // batch's own delete then finds it gone). If this delete fails, the hide still covers the batch.
        await job.message.delete();
        this.#metrics.count(MetricName.DuplicateSkipped, 1, byType(envelope));
        log.info('another message holds this job: deleted this copy', refusal);
        return 'duplicate';
      }
      case 'dead-copy':
        this.#metrics.count(MetricName.DeadCopyDropped, 1, byType(envelope));
        log.warn('copy of a dead-lettered job: deleting it (redrive from the DLQ to run it again)', refusal);
        return 'dead-copy';
      case 'own-message-early': {
        this.#metrics.count(MetricName.OwnMessageEarly);
        const seconds = Math.ceil(decision.hideForMs / 1000) + 1;
        log.info('own message back while its lease runs: hiding it until the lease ends', {
          ...refusal,
          hideSeconds: seconds,
        });
        this.#metrics.count(MetricName.HandBack);
        await message.giveBack(seconds, 'own message early');
        return 'own-message-early';
      }
      case 'contended':
        this.#metrics.count(MetricName.HandBack);
        await message.giveBack(1, 'claim refused by a lease that just ended');
        return 'contended';
    }
  }

  /** Runs a claimed job under its heartbeat and ends the attempt: committed, or the failure decision. */
  async #run(
    job: Job,
    definition: AnyJobDefinition,
    lease: JobLease,
    renewer: JobRenewer,
    leaseMs: number,
    claimedAt: number,
    deadline: number | undefined,
  ): Promise<RecordOutcome['action']> {
    const { envelope, log } = job;
    const started = this.#now();
    const heartbeat = new Heartbeat({
      target: renewer,
      intervalMs: Math.min(this.#heartbeatMs, Math.max(100, Math.floor(leaseMs / 3))),
      leaseUntil: lease.leaseUntil,
      // Beats are counted from the claim's request: a slow claim answer is renewed at once.
      renewedAt: claimedAt,
      safetyMs: leaseSafetyMs(leaseMs),
      ...(deadline === undefined ? {} : { deadline }),
      now: this.#now,
      onRenewed: (until) => {
        this.#metrics.count(MetricName.LeaseRenewed);
        log.debug('lease renewed', { leaseUntil: until });
      },
      onRenewFailed: (error) =>
        log.warn('lease renewal failed; will retry before the lease ends', { error: describe(error) }),
      // Counted once, where the failure is handled.
      onLost: (error) => log.warn('lease lost: aborting the job', { error: describe(error) }),
    }).start();
    const signal = heartbeat.signal;
    let failure: unknown;
    let failed = false;
    try {
      await this.#runAndCommit(definition, envelope, lease, heartbeat, log);
    } catch (thrown) {
      failed = true;
      failure = signal.aborted && !(thrown instanceof LeaseLostError) ? (signal.reason ?? thrown) : thrown;
    } finally {
      await heartbeat.stop();
    }
    if (!failed) {
      // Committed: nothing below may turn the job into a failure.
      this.#completed(envelope, started, log);
      return 'completed';
    }
    const decision = decideFailure(failure, {
      attempts: lease.attempts,
      maxAttempts: this.#maxAttempts,
      backoffSeconds: (attempts) => backoffSeconds(attempts, this.#backoff, this.#random),
    });
    return this.#afterFailure(job, lease, renewer, failure, decision);
  }

  /** Validates the payload, runs the job and commits it fenced; optimistic conflicts re-run it a few times. */
  async #runAndCommit(
    definition: AnyJobDefinition,
    envelope: JobEnvelope,
    lease: JobLease,
    heartbeat: Heartbeat,
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
      signal: heartbeat.signal,
      leaseSignal: heartbeat.leaseSignal,
      worker: this.#worker,
      metrics: this.#metrics,
      optimisticTries: this.#optimisticTries,
      random: this.#random,
      now: this.#now,
    });
    try {
      await this.#commitLoop(definition, context, parsed.value, lease, heartbeat, log);
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
    heartbeat: Heartbeat,
    log: JobLog,
  ): Promise<void> {
    const signal = heartbeat.signal;
    for (let tryNumber = 1; ; tryNumber++) {
      const result = (await abortable(definition.run(context, payload), signal)) || undefined;
      signal.throwIfAborted();
      const effects = result?.effects ?? [];
      const fenced = effects.length > 0 ? [...effects, ...context.leaseFences()] : effects;
      const commit = await this.#commit(lease, result?.result, fenced, heartbeat.leaseSignal, log);
      if (commit.ok) return;
      const lost = context.lostLeaseAt(commit, effects.length);
      if (lost) throw namedLeaseLost(lost, 'completion');
      this.#metrics.count(MetricName.OptimisticConflict);
      log.info('completion hit an optimistic conflict; re-reading and retrying', { try: tryNumber });
      if (tryNumber >= this.#optimisticTries) throw new OptimisticConflictError('completion', tryNumber);
      await conflictPause(tryNumber, this.#random);
    }
  }

  /**
   * The commit (E6), bounded by the lease (not by the deadline: a fenced commit in flight may finish).
   * When its answer is unknown (an outage, or abandoned as the lease ran out), one read tells whether it
   * landed: COMPLETED under this very lease means done.
   */
  async #commit(
    lease: JobLease,
    result: unknown,
    effects: readonly Effect[],
    signal: AbortSignal,
    log: JobLog,
  ): Promise<FencedWriteResult> {
    try {
      return await inSpan(
        'leaseq.commit',
        { 'leaseq.attempt': lease.attempts, 'leaseq.token': lease.token },
        () => this.#store.complete(lease, result, effects, { signal }),
      );
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error;
      const bound = boundedSignal(Math.max(1000, leaseSafetyMs(this.#leaseMs)), 'commit check');
      try {
        const item = await this.#store.get(lease.dedupKey, { signal: bound.signal });
        if (
          item?.status === JobStatus.Completed &&
          item.token === lease.token &&
          item.owner === lease.owner
        ) {
          log.info('the commit went through though its answer was lost');
          return { ok: true };
        }
      } catch {
        // Still unknown: the failure below keeps the message, and the release (or the next claim) tells.
      } finally {
        bound.clear();
      }
      throw error;
    }
  }

  #completed(envelope: JobEnvelope, started: number, log: JobLog): void {
    this.#cache?.add(envelope.dedupKey);
    const at = this.#now();
    const duration = at - started;
    const jobType = byType(envelope);
    this.#metrics.count(MetricName.JobSucceeded, 1, jobType);
    // `worker` is for local pools (InMemoryMetrics); the EMF sink drops it (unbounded in Lambda).
    this.#metrics.count(MetricName.JobsPerWorker, 1, { ...jobType, worker: this.#worker });
    this.#metrics.observe(MetricName.JobDuration, duration, jobType);
    this.#metrics.observe(MetricName.QueueLag, at - Date.parse(envelope.createdAt), jobType);
    log.info('job completed', { durationMs: duration });
  }

  /** Carries out a failure decision (failure-decision.ts). */
  async #afterFailure(
    job: Job,
    lease: JobLease,
    renewer: JobRenewer,
    error: unknown,
    decision: FailureDecision,
  ): Promise<RecordOutcome['action']> {
    const { envelope, message, log } = job;
    switch (decision.kind) {
      case 'completed-earlier':
        return this.#completedEarlier(job);
      case 'lease-lost':
        // Another worker owns the job now (or will, once the lease ends). Our receipt handle may be
        // stale, so we neither delete nor touch the message; our writes were refused by the fence.
        this.#metrics.count(MetricName.LeaseLost);
        log.warn('lease lost; leaving the job to its new owner', { error: describe(error) });
        return 'lease-lost';
      case 'dead-letter':
        return (await this.#deadLetterer.claimed(message, envelope, lease, renewer, log, decision.cause))
          .action;
      case 'retry':
        return this.#release(job, lease, error, decision);
    }
  }

  /** A refused write showed the job COMPLETED under this lease: an earlier commit's answer was lost. */
  #completedEarlier(job: Job): 'completed' {
    job.log.info('the commit had gone through (its answer was lost): the job is done');
    this.#cache?.add(job.envelope.dedupKey);
    this.#metrics.count(MetricName.JobSucceeded, 1, byType(job.envelope));
    return 'completed';
  }

  /** Releases the lease with the decision's backoff (E6) and gives the message back for that long. */
  async #release(
    job: Job,
    lease: JobLease,
    error: unknown,
    decision: Extract<FailureDecision, { kind: 'retry' }>,
  ): Promise<RecordOutcome['action']> {
    const { message, log } = job;
    if (decision.outage) this.#metrics.count(MetricName.StoreUnavailable);
    this.#metrics.count(MetricName.JobRetried, 1, byType(job.envelope));
    trace.getActiveSpan()?.addEvent('leaseq.retry', {
      'leaseq.retry.delay_seconds': decision.delaySeconds,
      'error.type': errorClass(error),
    });
    log.warn('attempt failed; releasing the lease and retrying after a backoff', {
      reason: errorClass(error),
      error: describe(error),
      delaySeconds: decision.delaySeconds,
      checkpoint: lease.checkpoint?.step,
      attemptsLeft: this.#maxAttempts - lease.attempts,
    });
    const bound = boundedSignal(Math.max(this.#leaseMs, lease.leaseUntil - this.#now()), 'release');
    try {
      await this.#store.release(
        lease,
        this.#now() + decision.delaySeconds * 1000,
        { message: describe(error), errorClass: errorClass(error) },
        { refundAttempt: decision.refundAttempt, signal: bound.signal },
      );
    } catch (releaseError) {
      if (releaseError instanceof LeaseLostError && releaseError.completedByThisLease) {
        return this.#completedEarlier(job);
      }
      if (releaseError instanceof LeaseLostError) {
        log.warn('lease lost while releasing; leaving the job to its new owner', {
          error: describe(releaseError),
        });
        return 'lease-lost';
      }
      // The lease will simply expire; the message comes back after the backoff and takes it over.
      log.warn('could not release the lease; it will expire instead', { error: describe(releaseError) });
    } finally {
      bound.clear();
    }
    await message.giveBack(decision.delaySeconds, errorClass(error));
    if (error instanceof LeaseRanOutError) return 'lease-ran-out';
    return decision.deadline ? 'deadline' : 'retry';
  }
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

/** Whether a record's message is deleted (the job is settled) or stays in the queue. */
function dispositionOf(action: RecordOutcome['action']): RecordOutcome['disposition'] {
  return action === 'completed' ||
    action === 'dead-lettered' ||
    action === 'duplicate' ||
    action === 'dead-copy'
    ? 'delete'
    : 'retain';
}

/**
 * The `jobType` dimension of per-job metrics: a registered type (the envelope was checked against the
 * registry), so a small fixed set; never the dedup key. One frozen object per type, built once (the
 * registry bounds the map): no allocation per metric call.
 */
function byType(envelope: JobEnvelope): Readonly<Record<string, string>> {
  let dimensions = TYPE_DIMENSIONS.get(envelope.type);
  if (!dimensions) {
    dimensions = Object.freeze({ jobType: envelope.type });
    TYPE_DIMENSIONS.set(envelope.type, dimensions);
  }
  return dimensions;
}
const TYPE_DIMENSIONS = new Map<string, Readonly<Record<string, string>>>();
