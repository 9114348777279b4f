import { describe } from '../../error-text.ts';
import { StoreRefusedError } from '../../errors.ts';
import type { JobQueue } from '../contract/job-queue.ts';
import type { DeadLetterCause, JobLease, JobStore } from '../contract/job-store.ts';
import { capLeaseToDeadline, visibilityForLease } from '../decisions/lease-timing.ts';
import type { JobLog } from '../observe/job-log.ts';
import type { Renewable } from './heartbeat.ts';

export interface JobRenewerOptions {
  readonly store: JobStore;
  readonly queue: JobQueue;
  readonly lease: JobLease;
  readonly receiptHandle: string;
  /** The lease length one renewal grants (capped to the deadline). */
  readonly leaseMs: number;
  readonly deadline?: number;
  readonly log: JobLog;
  readonly now: () => number;
}

/**
 * The one way a claimed job's lease is extended (protocol edge E4): a fenced DynamoDB renewal, then the
 * message's visibility moved to match. The heartbeat calls `renew` on every beat, and the dead-letterer
 * `fence` once before the letter leaves.
 *
 * The fenced renewal is the lease. The visibility only keeps the message from coming back early; when
 * it cannot be moved (the message was received again, so this receipt is stale, or SQS failed) the copy
 * that comes back finds the live lease and is hidden again. Neither aborts a job that holds its lease.
 */
export class JobRenewer implements Renewable {
  readonly #o: JobRenewerOptions;
  #visibilityWarned = false;

  constructor(options: JobRenewerOptions) {
    this.#o = options;
  }

  /** Renews; resolves with the new lease end. Throws LeaseLostError when fenced out. */
  async renew(signal?: AbortSignal): Promise<number> {
    const { store, lease, deadline, now } = this.#o;
    const at = now();
    // At the deadline there is nothing left to grant: the heartbeat stops the job with a DeadlineError.
    const ms = capLeaseToDeadline(this.#o.leaseMs, at, deadline);
    if (ms <= 0) return lease.leaseUntil;
    await store.renew(lease, ms, at, signal ? { signal } : {});
    // The renewal is done here: the visibility follows in the background, so a slow SQS answer can
    // neither delay the beat nor make a renewed lease look lost.
    void this.#followVisibility(ms);
    return lease.leaseUntil;
  }

  /**
   * The dead-letter fence (E9): a fenced renewal that also records `cause` on the item; resolves with the
   * new lease end, throws LeaseLostError when fenced out. Its lease of `leaseMs` is capped to the deadline
   * like every other; at the deadline it is still written, ending now: the proof of ownership is the
   * write, and the recorded cause lets whoever takes the job over finish the dead-lettering.
   */
  async fence(cause: DeadLetterCause, leaseMs: number, signal?: AbortSignal): Promise<number> {
    const { store, lease, deadline, now } = this.#o;
    const at = now();
    const ms = capLeaseToDeadline(leaseMs, at, deadline);
    try {
      await store.renew(lease, ms, at, { deadLetter: cause, ...(signal ? { signal } : {}) });
    } catch (error) {
      if (!(error instanceof StoreRefusedError)) throw error;
      // A refusal for what the fence carries (an item near 400 KB) comes back on every try, and would
      // be read as a lost lease confirmation: the job would run again. The minimal fence records only
      // the reason (markDead stores the error text, shortened to the room left).
      this.#o.log.warn('the store refused the dead-letter fence; fencing again with the reason only', {
        problem: error.problem,
      });
      const minimal = { reason: cause.reason, errorClass: '', errorMessage: '' };
      await store.renew(lease, ms, at, { deadLetter: minimal, ...(signal ? { signal } : {}) });
    }
    if (ms > 0) void this.#followVisibility(ms);
    return lease.leaseUntil;
  }

  async #followVisibility(ms: number): Promise<void> {
    try {
      await this.#o.queue.changeVisibility(this.#o.receiptHandle, visibilityForLease(ms));
    } catch (error) {
      if (!this.#visibilityWarned) {
        this.#visibilityWarned = true;
        this.#o.log.warn('could not extend the message visibility; the lease holds and the job goes on', {
          error: describe(error),
          receiptStale: isReceiptGone(error),
        });
      }
    }
  }
}

const RECEIPT_GONE = new Set(['ReceiptHandleIsInvalid', 'MessageNotInflight', 'InvalidParameterValue']);
function isReceiptGone(error: unknown): boolean {
  return error instanceof Error && RECEIPT_GONE.has(error.name);
}
