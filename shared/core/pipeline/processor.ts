// The pipeline of docs/protocol.md's state machine, one record at a time: parse, the payload check (its
// refusal: E13, refused-job.ts), local cache, the limits (limit-gate.ts), the fast path (E12,
// fast-path.ts) or the claim (E1-E3, claim.ts) and its refusals (refusal.ts), the leased run (E4-E6,
// leased-run.ts, commit.ts), a failure's release or retry (E7/E8, release.ts) or dead letter (E9,
// dead-letterer.ts). Each step lives in its own file; this one only sequences them.
import { SpanStatusCode } from '@opentelemetry/api';
import type { SQSRecord } from 'aws-lambda';
import { InvalidEnvelopeError } from '../../errors.ts';
import { DEFAULTS } from '../contract/defaults.ts';
import type { JobEnvelope } from '../contract/envelope.ts';
import { readJobBody } from '../contract/plain-body.ts';
import { recordedDeadCause } from '../decisions/claim-decision.ts';
import { capLeaseToDeadline } from '../decisions/lease-timing.ts';
import type { AnyJobDefinition } from '../model/job-definition.ts';
import { JobLog } from '../observe/job-log.ts';
import { MetricName } from '../observe/metric-names.ts';
import { contextFromTraceparent, inSpan, SpanKind } from '../observe/spans.ts';
import { byType, cacheType, type Job } from './attempt.ts';
import { claim, startAttempt } from './claim.ts';
import { CopyShare } from './copy-share.ts';
import { DeadLetterer } from './dead-letterer.ts';
import { readBeforeFast, runFast } from './fast-path.ts';
import { checkedPayload } from './job-run.ts';
import { runLeased } from './leased-run.ts';
import { withinLimits } from './limit-gate.ts';
import { outcomeOf, type ProcessOptions, type RecordAction, type RecordOutcome } from './outcome.ts';
import { hashOfPayload } from './payload-mismatch.ts';
import { withPayload } from './payload-ref.ts';
import { RecordMessage } from './record-message.ts';
import { actOnRefusal } from './refusal.ts';
import { refuseJob } from './refused-job.ts';
import { settleFailure } from './release.ts';
import { checkCollaborators, type JobProcessorOptions, resolveSettings, type Settings } from './settings.ts';

export type { ProcessOptions, RecordAction, RecordOutcome } from './outcome.ts';
export type { JobProcessorOptions } from './settings.ts';

/**
 * The shortest lease worth starting a job (or its fallback claim) under: the configured lease's own
 * minimum, so only a deadline that caps the lease can make the processor hand a record back.
 */
const MIN_LEASE_MS = DEFAULTS.minLeaseMs;

/**
 * Runs one SQS record through the protocol of docs/protocol.md. It never throws: every outcome,
 * including store outages, becomes a {@link RecordOutcome}.
 */
export class JobProcessor {
  readonly #s: Settings;
  readonly #deadLetterer: DeadLetterer;
  readonly #copies: CopyShare;

  /** @throws RangeError for settings out of range, ConfigError for a store a job type needs missing (settings.ts). */
  constructor(options: JobProcessorOptions) {
    this.#s = resolveSettings(options);
    checkCollaborators(this.#s);
    this.#copies = new CopyShare(options.fastPathReadFirst === true);
    this.#deadLetterer = new DeadLetterer({
      store: this.#s.store,
      queue: this.#s.queue,
      metrics: this.#s.metrics,
      worker: this.#s.worker,
      backoffSeconds: this.#s.backoffSeconds,
      callBudgetMs: this.#s.leaseMs,
      errorText: this.#s.errorText,
    });
  }

  get worker(): string {
    return this.#s.worker;
  }

  /**
   * Hands back a record that was not started (a FIFO group stopped before it): visible again at once, so
   * its group resumes in order as soon as the failed head is retried. Never throws.
   */
  async defer(record: SQSRecord): Promise<RecordOutcome> {
    const log = new JobLog(this.#s.logger, { messageId: record.messageId, worker: this.#s.worker });
    log.info('not started: an earlier message of its FIFO group failed');
    this.#s.metrics.count(MetricName.HandBack);
    await new RecordMessage(this.#s.queue, record, log).giveBack(0, 'fifo group stopped');
    return outcomeOf(record.messageId, 'deferred');
  }

  /** Processes one record; never throws. A body that is not a job's envelope is dead-lettered (E9). */
  async process(record: SQSRecord, options: ProcessOptions = {}): Promise<RecordOutcome> {
    const s = this.#s;
    const keys = { messageId: record.messageId, worker: s.worker };
    const timing = { receivedAt: options.receivedAt ?? s.now(), now: s.now };
    let envelope: JobEnvelope;
    try {
      // An envelope, or a plain body read by the job set's plainBodies (contract/plain-body.ts).
      envelope = readJobBody(record.body, s.parseOptions, {
        messageId: record.messageId,
        sentAt: Number(record.attributes.SentTimestamp) || undefined,
      });
    } catch (error) {
      const log = new JobLog(s.logger, keys);
      const done = await this.#deadLetterer.unclaimed(
        new RecordMessage(s.queue, record, log, timing),
        error,
        log,
      );
      return outcomeOf(record.messageId, done.action);
    }
    const log = new JobLog(s.logger, {
      dedupKey: envelope.dedupKey,
      ...keys,
      type: envelope.type,
      // The producer's W3C trace id, so one job can be followed from the send to its result.
      ...(envelope.trace ? { traceId: envelope.trace.split('-')[1] } : {}),
    });
    const parsed = { message: new RecordMessage(s.queue, record, log, timing), envelope, log };
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
        const action = await this.#pipeline(parsed, options.deadline);
        span.setAttribute('leaseq.outcome', action);
        if (action === 'dead-lettered')
          span.setStatus({ code: SpanStatusCode.ERROR, message: 'dead-lettered' });
        return outcomeOf(record.messageId, action, envelope.dedupKey);
      },
      { parent: contextFromTraceparent(envelope.trace), kind: SpanKind.CONSUMER, errorText: s.errorText },
    );
  }

  /** The edges after parsing, in order: payload, cache, fast path, claim or its refusal, run or failure. */
  async #pipeline(parsed: Omit<Job, 'payload'>, deadline: number | undefined): Promise<RecordAction> {
    const s = this.#s;
    const { envelope, message, log } = parsed;
    s.metrics.count(MetricName.MessageReceived);
    const definition = s.registry.get(envelope.type);
    if (!definition) throw new Error(`unreachable: ${envelope.type} passed parse but is not registered`);
    // Before anything is claimed or run, as a bad envelope is: a copy nobody can run must not take the
    // job item of its key (it would take over, and dead-letter, a good job waiting for its retry), and
    // its key stays free for a corrected resend. The job's own message is another matter (E13,
    // refused-job.ts): the job it guards ends DEAD with the refusal's reason.
    let payload: unknown;
    let payloadHash: string | undefined;
    try {
      payload = await checkedPayload(definition, await withPayload(envelope, s.payloads));
      // Of the payload, not of a claim-check pointer; once a message (payload-mismatch.ts).
      payloadHash = hashOfPayload(definition, payload);
    } catch (error) {
      if (error instanceof InvalidEnvelopeError) {
        const refusal = { reason: `invalid-${error.problem}`, error };
        const job = { ...parsed, payload: undefined };
        return refuseJob(s, job, definition, refusal, this.#deadLetterer, deadline);
      }
      // The schema itself threw, or a claim-checked payload could not be read (not a refusal): nothing was
      // claimed, so the message is what retries it (the queue's maxReceiveCount bounds one that always throws).
      const delay = s.backoffSeconds(message.receives);
      log.error(
        envelope.payloadRef
          ? 'the payload could not be read from its bucket; job not run, giving the message back'
          : 'the payload schema threw; job not run, giving the message back',
        {
          delaySeconds: delay,
          error: s.errorText(error),
        },
      );
      s.metrics.count(MetricName.HandBack);
      await message.giveBack(delay, envelope.payloadRef ? 'payload unreadable' : 'payload schema threw');
      return 'retry';
    }
    const job: Job = { ...parsed, payload, ...(payloadHash === undefined ? {} : { payloadHash }) };
    if (s.cache) {
      // Known COMPLETED as a job of this type: a copy. (Another type's message misses and is refused by
      // the store as a collision.)
      if (s.cache.has(envelope.dedupKey, cacheType(job))) {
        s.metrics.count(MetricName.CacheHit);
        s.metrics.count(MetricName.DuplicateSkipped, 1, byType(envelope));
        log.info('duplicate of a completed job (local cache): deleting this copy');
        return 'duplicate';
      }
      s.metrics.count(MetricName.CacheMiss);
    }
    // Limits (limit-gate.ts): a job whose limit is full writes nothing and uses no attempt.
    return withinLimits(s, job, definition, this.#deadLetterer, deadline, (run, def) =>
      this.#run(run, def, deadline),
    );
  }

  /** The edges from the fast path on: fast path, claim or its refusal, run or failure. */
  async #run(job: Job, definition: AnyJobDefinition, deadline: number | undefined): Promise<RecordAction> {
    const s = this.#s;
    const { envelope, message } = job;
    let now = s.now();
    let leaseMs = capLeaseToDeadline(s.leaseMs, now, deadline);
    if (leaseMs < MIN_LEASE_MS) return this.#tooLate(job);

    // E12 takes first receives only: a redelivery (a failed attempt, a dead worker, a run past its
    // budget) runs leased, with the heartbeat, checkpoints and the attempt count. A limit's re-send
    // starts its receive count again, but it is a redelivery too (a fast run past its budget may have
    // handed it back to run leased before its bounces).
    let failure: { readonly error: unknown } | undefined;
    const firstReceive = message.record.attributes.ApproximateReceiveCount === '1' && !message.resent;
    if (definition.fastPath === true && firstReceive) {
      // Each message is noted once: by its read when the read answered, else by its fast run's end (a
      // failed read notes nothing, so failing reads alone would never end the read-first mode).
      let noted = false;
      const copy = (isCopy: boolean) => {
        noted = true;
        this.#copies.note(isCopy);
      };
      const readFirst = this.#copies.readFirst;
      const read = readFirst ? await readBeforeFast(s, job, copy) : undefined;
      if (read && 'action' in read) return read.action;
      // An item the read found unfinished goes straight to the claim: nothing ran, nothing fell back.
      if (read === undefined) {
        if (readFirst) {
          // The read took some of the time: the fast run's budget counts from after it, within the deadline.
          now = s.now();
          leaseMs = capLeaseToDeadline(s.leaseMs, now, deadline);
          if (leaseMs < MIN_LEASE_MS) return this.#tooLate(job);
        }
        const fast = await runFast(s, job, definition, leaseMs, now);
        if ('action' in fast) {
          if (!noted) noteFastAction(fast.action, copy);
          return fast.action;
        }
        if ('error' in fast) failure = fast;
        s.metrics.count(MetricName.FastPathFallback, 1, byType(envelope));
      }
      // The claim below starts now, and its lease is capped to the deadline from now.
      now = s.now();
      leaseMs = capLeaseToDeadline(s.leaseMs, now, deadline);
      if (leaseMs < MIN_LEASE_MS) return this.#tooLate(job);
    }

    // E1-E3.
    const claimed = await claim(s, job, leaseMs, now);
    if (claimed === undefined) return 'store-unavailable';
    if (!claimed.claimed) return actOnRefusal(s, job, claimed.existing);
    // A fast attempt that failed was counted when it started; this claim only records its failure.
    if (!failure) s.metrics.count(MetricName.JobClaimed);
    const attempt = startAttempt(s, job, definition, claimed, { leaseMs, claimedAt: now, deadline });

    const recorded = recordedDeadCause(claimed.previous);
    if (recorded !== undefined) {
      // A dead-lettering was cut short after its fence (a failed send, a crash, the deadline): it is
      // finished with the cause it recorded; the job is not run again (E9).
      return (await this.#deadLetterer.claimed(attempt, recorded)).action;
    }
    if (attempt.lease.attempts > s.maxAttempts) {
      // The last attempt ended without releasing (its worker died or lost the lease): no run is left (E9).
      const last = claimed.previous;
      const done = await this.#deadLetterer.claimed(attempt, {
        reason: 'max-attempts',
        errorClass: last?.lastErrorClass ?? 'LeaseExpired',
        errorMessage: last?.lastError ?? 'attempts exhausted (the last attempt lost its lease)',
      });
      return done.action;
    }
    // The fast attempt failed before anything was written: its failure is decided under this lease.
    if (failure) return settleFailure(s, attempt, failure.error, this.#deadLetterer);
    // E4-E6, then E7/E8 or E9 on failure.
    return runLeased(s, attempt, this.#deadLetterer);
  }

  /** Gives the message back at once: too little of the invocation is left to start (or go on). */
  async #tooLate(job: Job): Promise<'deadline'> {
    this.#s.metrics.count(MetricName.HandBack);
    await job.message.giveBack(0, 'too close to the invocation deadline to start');
    return 'deadline';
  }
}

/** What a fast attempt's end tells the copy share: committed, or refused as a copy; else nothing. */
function noteFastAction(action: RecordAction, copy: (isCopy: boolean) => void): void {
  if (action === 'completed') copy(false);
  else if (action === 'duplicate' || action === 'dead-copy') copy(true);
}
