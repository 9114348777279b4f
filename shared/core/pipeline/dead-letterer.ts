import { describe, errorClass } from '../../error-text.ts';
import {
  InvalidEnvelopeError,
  JobCancelledError,
  LeaseLostError,
  LetterRefusedError,
  StoreUnavailableError,
} from '../../errors.ts';
import type { DeadLetterReason, JobQueue } from '../contract/job-queue.ts';
import type { JobStore } from '../contract/job-store.ts';
import type { DeadLetterCause } from '../decisions/failure-decision.ts';
import { boundedSignal } from '../leases/timeout-signal.ts';
import type { JobLog } from '../observe/job-log.ts';
import { MetricName } from '../observe/metric-names.ts';
import type { MetricsSink } from '../observe/metrics.ts';
import { inSpan } from '../observe/spans.ts';
import { noteStoreUnavailable } from '../observe/store-throttle.ts';
import { type Attempt, byType, type Job } from './attempt.ts';
import { stopCancelled } from './cancelled.ts';
import { noteLeaseLost } from './history.ts';
import type { RecordMessage } from './record-message.ts';

/**
 * How a dead-lettering ended: `dead-lettered` (the letter is out, M may go), or M kept for another try
 * (outcome.ts decides what each means for the message).
 */
export interface DeadLetterOutcome {
  readonly action: 'dead-lettered' | 'lease-lost' | 'cancelled' | 'store-unavailable' | 'retry';
}

export interface DeadLettererOptions {
  readonly store: JobStore;
  readonly queue: JobQueue;
  readonly metrics: MetricsSink;
  readonly worker: string;
  /** Backoff (whole seconds) before the message that could not be dead-lettered comes back. */
  readonly backoffSeconds: (attempts: number) => number;
  /** How long each store call of a dead-lettering may take (and the least lease its fence grants). */
  readonly callBudgetMs: number;
  /** The text logged and lettered for a thrown value (Settings.errorText: redacted, capped, valid). @default describe */
  readonly errorText?: (error: unknown) => string;
}

/**
 * What dead-lettering a claimed job needs of its attempt (pipeline/attempt.ts); its definition, when
 * given, says how long the dead key stays dead (`deadKeyTtl`).
 */
export type ClaimedJob = Pick<Attempt, 'message' | 'envelope' | 'lease' | 'renewer' | 'log'> &
  Partial<Pick<Attempt, 'definition'>>;

/**
 * The one way a job reaches the DLQ (protocol edge E9). A claimed job: fence (a fenced renewal),
 * letter, DEAD item, delete the original; each step that fails keeps the message, since it is what brings
 * the job back. A message that never became a job (a bad body): letter, delete.
 */
export class DeadLetterer {
  readonly #o: DeadLettererOptions & { readonly errorText: (error: unknown) => string };

  constructor(options: DeadLettererOptions) {
    this.#o = { ...options, errorText: options.errorText ?? describe };
  }

  claimed(attempt: ClaimedJob, cause: DeadLetterCause): Promise<DeadLetterOutcome> {
    return inSpan(
      'leaseq.dead_letter',
      { 'leaseq.dead_letter.reason': cause.reason, 'error.type': cause.errorClass },
      () => this.#claimed(attempt, cause),
      { errorText: this.#o.errorText },
    );
  }

  async #claimed(attempt: ClaimedJob, cause: DeadLetterCause): Promise<DeadLetterOutcome> {
    const { message, envelope, lease, renewer, log } = attempt;
    const { record } = message;
    const reason: DeadLetterReason = {
      ...cause,
      attempts: lease.attempts,
      dedupKey: envelope.dedupKey,
      worker: this.#o.worker,
      messageId: record.messageId,
      type: envelope.type,
    };
    const lost = async (error: unknown, line: string): Promise<DeadLetterOutcome> => {
      // Cancelled before the letter (or the DEAD marking): no job to dead-letter; a letter already sent
      // is stale, and redrive skips a cancelled job.
      if (error instanceof JobCancelledError) {
        return { action: await stopCancelled(attempt, this.#o.metrics, this.#o.errorText(error)) };
      }
      this.#o.metrics.count(MetricName.LeaseLost);
      log.warn(line, { error: this.#o.errorText(error) });
      await noteLeaseLost(this.#o.store, lease, this.#o.errorText(error), Date.now(), log);
      return { action: 'lease-lost' };
    };
    const keep = async (error: unknown, line: string, action: DeadLetterOutcome['action']) => {
      if (error instanceof StoreUnavailableError) noteStoreUnavailable(this.#o.metrics, log, error);
      log.warn(line, { error: this.#o.errorText(error) });
      await message.giveBack(this.#o.backoffSeconds(lease.attempts), line);
      return { action };
    };
    // Fence before anything leaves: a fenced renewal proves this worker still holds the job (and keeps
    // it for the next steps). A worker that lost its lease unknowingly sends no letter for a job that
    // its new owner may well complete. The fence records the cause on the item: if this dead-lettering
    // is cut short (a failed send, a crash, the deadline), the next claim finishes it with that cause
    // instead of running the job again.
    try {
      await this.#bounded((signal) => renewer.fence(cause, this.#o.callBudgetMs, signal));
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
      await sendLetter(this.#o.queue, record, reason, log, true);
    } catch (error) {
      return keep(error, 'could not send to the DLQ; keeping the message for a retry', 'retry');
    }
    try {
      await this.#bounded((signal) =>
        this.#o.store.markDead(
          lease,
          {
            message: cause.errorMessage,
            errorClass: cause.errorClass,
            reason: cause.reason,
            ...(attempt.definition?.deadKeyTtl === undefined
              ? {}
              : { deadKeyTtlSeconds: attempt.definition.deadKeyTtl }),
          },
          { signal },
        ),
      );
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
    await message.delete();
    this.#o.metrics.count(MetricName.JobDeadLettered, 1, { jobType: envelope.type });
    log.error('job dead-lettered', {
      reason: cause.reason,
      errorClass: cause.errorClass,
      error: cause.errorMessage,
    });
    return { action: 'dead-lettered' };
  }

  /** A message that is not a valid job: its letter says why; no job item is written. */
  async unclaimed(message: RecordMessage, error: unknown, log: JobLog): Promise<DeadLetterOutcome> {
    const { record } = message;
    const problem = error instanceof InvalidEnvelopeError ? error.problem : 'bad-schema';
    // A plain body's refusal names what was read of the job; a field of the producer's body is no key.
    const plain = error instanceof InvalidEnvelopeError ? error.plainJob : undefined;
    const hint = plain ? plain.dedupKey : dedupKeyHint(record.body);
    const reason: DeadLetterReason = {
      reason: `invalid-${problem}`,
      errorClass: errorClass(error),
      errorMessage: this.#o.errorText(error),
      attempts: 0,
      worker: this.#o.worker,
      messageId: record.messageId,
      ...(hint === undefined ? {} : { dedupKey: hint }),
      ...(plain?.type === undefined ? {} : { type: plain.type }),
    };
    return letterUnrun(this.#o, message, reason, log, 'bad message');
  }

  async #bounded<T>(call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const bound = boundedSignal(this.#o.callBudgetMs, 'dead-lettering store call');
    try {
      return await call(bound.signal);
    } finally {
      bound.clear();
    }
  }
}

/**
 * Sends the letter. One SQS refuses for what it carries is refused on every try, so instead of looping
 * it is sent again minimal: the reason and the job's keys, no error text (a claimed job's item keeps the
 * error). Any other failure, or a refused minimal letter, is thrown.
 */
async function sendLetter(
  queue: DeadLettererOptions['queue'],
  record: RecordMessage['record'],
  reason: DeadLetterReason,
  log: JobLog,
  itemKeepsError: boolean,
): Promise<void> {
  const groupId = record.attributes.MessageGroupId;
  try {
    await queue.sendToDeadLetter(record.body, reason, groupId);
  } catch (error) {
    if (!(error instanceof LetterRefusedError)) throw error;
    log.warn('SQS refused the letter for its contents; sending a minimal letter', { code: error.code });
    await queue.sendToDeadLetter(record.body, minimalReason(reason, error.code, itemKeepsError), groupId);
  }
}

/** A letter's reason without free text: its reason, keys and count, and why it is minimal. */
function minimalReason(reason: DeadLetterReason, code: string, itemKeepsError: boolean): DeadLetterReason {
  return {
    reason: reason.reason,
    errorClass: '',
    errorMessage: `SQS refused the full letter (${code})${itemKeepsError ? '; the job item keeps the error' : ''}`,
    attempts: reason.attempts,
    worker: reason.worker,
    messageId: reason.messageId,
    ...(reason.dedupKey === undefined ? {} : { dedupKey: reason.dedupKey }),
    ...(reason.type === undefined ? {} : { type: reason.type }),
    ...(reason.payloadHashes === undefined ? {} : { payloadHashes: reason.payloadHashes }),
  };
}

/** What lettering a message that never ran needs (the pipeline's Settings has all of it). */
export type UnrunLetterDeps = Pick<DeadLettererOptions, 'queue' | 'metrics' | 'worker' | 'backoffSeconds'> & {
  readonly errorText: (error: unknown) => string;
};

/**
 * A copy refused before it was claimed or run: a payload its schema refuses (`invalid-bad-payload`) of a
 * message the job item does not wait for (refused-job.ts tells the job's own message apart), or a
 * dedupKey held by a job of another type (`dedup-key-collision`). Nothing was written for it, and the
 * job item (if any) is left exactly as it was: its letter is all that happens. The type is known
 * (registered), so the letter and the metric carry it.
 */
export function letterRefusedJob(
  o: UnrunLetterDeps,
  job: Job,
  reason: string,
  error: unknown,
  extra: Pick<DeadLetterReason, 'payloadHashes'> = {},
): Promise<DeadLetterOutcome> {
  const { envelope, message, log } = job;
  const letter: DeadLetterReason = {
    ...extra,
    reason,
    errorClass: errorClass(error),
    errorMessage: o.errorText(error),
    attempts: 0,
    dedupKey: envelope.dedupKey,
    worker: o.worker,
    messageId: message.record.messageId,
    type: envelope.type,
  };
  return letterUnrun(o, message, letter, log, 'job refused before it ran', byType(envelope));
}

/** Letter, then delete: a message that never ran. A failed send keeps the message for a retry. */
async function letterUnrun(
  o: UnrunLetterDeps,
  message: RecordMessage,
  reason: DeadLetterReason,
  log: JobLog,
  what: string,
  dimensions?: Readonly<Record<string, string>>,
): Promise<DeadLetterOutcome> {
  const { record } = message;
  try {
    await sendLetter(o.queue, record, reason, log, false);
  } catch (sendError) {
    log.error(`${what}, and the DLQ send failed; keeping it for a retry`, { error: o.errorText(sendError) });
    await message.giveBack(o.backoffSeconds(2), 'dlq send failed');
    return { action: 'retry' };
  }
  await message.delete();
  o.metrics.count(MetricName.JobDeadLettered, 1, dimensions);
  log.error(`${what}: dead-lettered`, { reason: reason.reason, error: reason.errorMessage });
  return { action: 'dead-lettered' };
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
