import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { storableText } from '../../error-text.ts';
import type { HistoryEvent, MismatchEvent } from './job-history.ts';
import type { Checkpoint, JobItem } from './job-item.ts';

/** One DynamoDB write a job wants committed atomically with its checkpoint or completion. */
export type Effect = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** What a worker holds after a successful claim. `version` and `leaseUntil` move as it writes. */
export interface JobLease {
  readonly dedupKey: string;
  readonly owner: string;
  readonly token: number;
  readonly attempts: number;
  /** The item's refunds when it was claimed (absent: none). */
  readonly refunds?: number;
  /** The item's conflicts when it was claimed (absent: none). */
  readonly conflicts?: number;
  readonly messageId: string;
  version: number;
  leaseUntil: number;
  checkpoint?: Checkpoint;
  /**
   * The item's history as this lease knows it (the claim's old item, plus what this lease appended):
   * how a writer knows when an append would pass HISTORY_MAX. Absent: none.
   */
  history?: HistoryEvent[];
  /**
   * Events the claim could not write itself (a takeover: the claim cannot know it is one), written by
   * this lease's next write of the job (renew, checkpoint, complete, release, markDead) and then cleared.
   */
  pendingHistory?: HistoryEvent[];
}

export interface ClaimRequest {
  readonly dedupKey: string;
  readonly owner: string;
  readonly messageId: string;
  /** The id the message was first sent under, when leaseq re-sent it (stored as the item's `originId`). */
  readonly originId?: string;
  /**
   * The key's life the message was sent for (a redrive's `leaseq-life`, kept by every re-send): it claims
   * only an item of that life (or none), and never resets a dead key. Absent: any life (a producer's send).
   */
  readonly life?: number;
  readonly type: string;
  readonly createdAt: string;
  readonly leaseMs: number;
  readonly now: number;
  /**
   * Claim only an item that exists and names this message (`messageId`): the job a refused payload's own
   * message guards (docs/protocol.md, E13), never a job another message guards nor a new one. Such a
   * claim never resets a dead key. Absent: any claimable item, or none.
   */
  readonly onlyIfMessageId?: string;
  /**
   * The message's payload hash (decisions/payload-hash.ts): the claim takes only an item with the same
   * one or none, and stores it on an item without. Absent: its type compares no payloads.
   */
  readonly payloadHash?: string;
  /**
   * With `payloadHash`: a refusal by a COMPLETED or DEAD item of another payload hash claims the key as a
   * new job in one more write (`onPayloadMismatch: 'new-job'`), the item reset as a dead key's is.
   */
  readonly newLifeOnMismatch?: boolean;
}

/** How a successful claim came about, from the item as it was before (undefined: there was none). */
export type ClaimKind = 'fresh' | 'retry' | 'takeover';

export type ClaimResult =
  | {
      readonly claimed: true;
      readonly lease: JobLease;
      readonly kind: ClaimKind;
      /**
       * The item before the claim; for a claim whose answer was lost (the SDK resent it), the item as
       * the claim left it, whose recorded cause and last error are still those from before.
       */
      readonly previous?: JobItem;
      /**
       * Set when the claim reset a DEAD item whose `deadKeyUntil` had passed (a fresh send of a dead key):
       * when it had been marked DEAD. `previous` is then absent: nothing of the dead run carries over.
       */
      readonly wasDeadAt?: number;
      /**
       * Set when the claim reset a finished job of another payload (`onPayloadMismatch: 'new-job'`): its
       * status and both hashes. `previous` is then absent, as for a dead key's reset.
       */
      readonly newLifeOf?: {
        readonly status: string;
        readonly jobHash: string;
        readonly messageHash: string;
      };
    }
  | { readonly claimed: false; readonly existing: JobItem };

/** Outcome of a fenced write that also carried effects. */
export type FencedWriteResult =
  | { readonly ok: true }
  /** One of the effects' own conditions failed (an optimistic version check): nothing was written. */
  | {
      readonly ok: false;
      readonly reason: 'effect-conflict';
      readonly index: number;
      /** The item was busy (a transaction conflict), not refused by its condition. */
      readonly busy?: boolean;
    };

/** The one-write fast path's commit: the claim's condition and the completion in one write. */
export interface FastCommitRequest {
  readonly dedupKey: string;
  /** This worker: stored as the owner of the completion. */
  readonly owner: string;
  readonly messageId: string;
  /** As {@link ClaimRequest.life}: a message sent for one life of the key commits only on that life. */
  readonly life?: number;
  readonly type: string;
  readonly createdAt: string;
  /** The commit's time: a lease ending before it is no longer live. */
  readonly now: number;
  /**
   * The worker's attempt budget: an item whose attempts reached it is refused (its last attempt died
   * holding the lease, or its dead-lettering is unfinished), so only a leased claim ends it.
   */
  readonly maxAttempts: number;
  /** As {@link ClaimRequest.payloadHash}: the commit takes only an item with the same hash or none. */
  readonly payloadHash?: string;
}

/** Outcome of {@link JobStore.claimAndComplete}. */
export type FastCommitResult =
  | { readonly ok: true }
  /** The claim's condition failed: the job is finished, or a live lease (or a backoff) holds it. */
  | { readonly ok: false; readonly reason: 'refused'; readonly existing: JobItem }
  /** One of the effects' own conditions failed, or its item was busy: nothing was written. */
  | {
      readonly ok: false;
      readonly reason: 'effect-conflict';
      readonly index: number;
      readonly busy?: boolean;
    };

/**
 * Per-call options of the store ports. `signal` bounds the call: the processor derives it from the lease
 * (a call still waiting when the lease would end is abandoned, so slow answers and SDK retries never
 * outlast the lease). An aborted call throws StoreUnavailableError; the write it carried may or may not
 * have been applied, exactly as for an answer lost on the network.
 */
export interface StoreCallOptions {
  readonly signal?: AbortSignal;
}

/** Options of {@link JobStore.get}. */
export interface GetOptions extends StoreCallOptions {
  /**
   * False: an eventually consistent read (half the price: 0.5 RRU up to 4 KB on DynamoDB), which may
   * return an earlier version of the item, never one that was not written. @default true
   */
  readonly consistent?: boolean;
}

/** Why a claimed job is dead-lettered: what its letter and its DEAD item say. */
export interface DeadLetterCause {
  readonly reason: string;
  readonly errorClass: string;
  readonly errorMessage: string;
}

/** Options of {@link JobStore.renew}. */
export interface RenewOptions extends StoreCallOptions {
  /**
   * The dead-letter fence (E9): the renewal also records the cause on the item (`deadReason`,
   * `lastError`, `lastErrorClass`), so whoever takes the job over finishes the dead-lettering with it
   * instead of running the job again. The lease end is then set as given, also when that is sooner than
   * the stored one (the fence is capped to the deadline). The error text is shortened to the room the
   * checkpoint leaves in the item; with an empty text and class (the minimal fence, sent again after a
   * StoreRefusedError) only the reason is recorded and the last error is left as it was.
   */
  readonly deadLetter?: DeadLetterCause;
}

/** Options of {@link JobStore.release} and {@link JobStore.markDead}. */
export interface GiveUpOptions extends StoreCallOptions {
  /**
   * The attempt ended because its lease ran out (a renewal failed or starved): the write also records a
   * `lease-lost` event with this text, so the history tells it without a request of its own.
   */
  readonly leaseLost?: string;
}

/** What a DEAD marking records: the error, the dead-letter reason, and how long the key stays dead. */
export interface DeadMarking {
  readonly message: string;
  readonly errorClass: string;
  /** The dead letter's reason (`max-attempts`, `permanent-error`, ...). @default 'unknown' */
  readonly reason?: string;
  /** The job type's `deadKeyTtl` in seconds: sets `deadKeyUntil`. Absent: copies dropped until TTL. */
  readonly deadKeyTtlSeconds?: number;
}

/**
 * The port for the `jobs` table. Every write after the claim is fenced: it only applies while the item
 * still names this owner and token, and refusals come back as {@link LeaseLostError}.
 */
export interface JobStore {
  /**
   * One conditional write: takes the job if absent, or not finished, its lease over and of the request's
   * type (an item keeps the type of its first claim; another type's message is refused in every state);
   * with `onlyIfMessageId`, only an existing item that names that message.
   */
  claim(request: ClaimRequest, options?: StoreCallOptions): Promise<ClaimResult>;
  /** Extends the lease; throws LeaseLostError when the owner/token no longer match. */
  renew(lease: JobLease, leaseMs: number, now: number, options?: RenewOptions): Promise<void>;
  /** Stores progress (and, atomically, the step's effects). Throws LeaseLostError when fenced out. */
  checkpoint(
    lease: JobLease,
    checkpoint: Checkpoint,
    effects?: readonly Effect[],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult>;
  /** Marks the job COMPLETED with its effects in one transaction. Throws LeaseLostError when fenced out. */
  complete(
    lease: JobLease,
    result: unknown,
    effects?: readonly Effect[],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult>;
  /**
   * The fast path (docs/protocol.md, "Fast path"): marks a job COMPLETED that nobody claimed, with its
   * effects, in one write, under the claim's condition (no item, or not finished, no live lease and the
   * same type). Of racing copies exactly one commit applies; the others are refused with the item they
   * found. The write bumps the token, so an owner whose lease ran out is fenced out as by a takeover.
   */
  claimAndComplete(
    request: FastCommitRequest,
    result: unknown,
    effects?: readonly Effect[],
    options?: StoreCallOptions,
  ): Promise<FastCommitResult>;
  /**
   * Gives the lease up after a failed attempt; the job may be claimed again from `retryAt`.
   * `refundAttempt` takes the attempt back (a store outage is not the job's failure) and counts it in
   * the item's `refunds`; `conflict` takes it back for an optimistic conflict (another writer's change)
   * and counts it in the item's `conflicts` instead.
   */
  release(
    lease: JobLease,
    retryAt: number,
    error: { message: string; errorClass: string },
    options?: GiveUpOptions & { refundAttempt?: boolean; conflict?: boolean },
  ): Promise<void>;
  /** Marks the job DEAD (it has been sent to the DLQ), with `deadAt` and a `dead` history event. */
  markDead(lease: JobLease, error: DeadMarking, options?: GiveUpOptions): Promise<void>;
  /**
   * Best effort, unfenced: appends a `lease-lost` event (`why`) to the item if it exists, changing no
   * protocol field. Costs a request of its own (a lost lease is rare); its failure is the caller's to
   * swallow.
   */
  recordLeaseLost?(lease: JobLease, why: string, now: number, options?: StoreCallOptions): Promise<void>;
  /**
   * Best effort: counts a dropped copy of the DEAD job `existing` (as a refused claim returned it) in a
   * `dropped` event: the last event's count grows when it is one, else one is appended. Applies only
   * while the item is still that item (same status and token). With `options.life`: a message a redrive
   * sent for that other life of the key, dropped by the waiting (RETRY_WAIT) or DEAD job of this one.
   */
  recordDroppedCopy?(
    existing: JobItem,
    messageId: string,
    now: number,
    options?: StoreCallOptions & { readonly life?: number },
  ): Promise<void>;
  /**
   * Best effort: a `mismatch` event on the job `existing` (as a refused claim returned it) naming the
   * message refused for another payload and both hashes. Applies only while the item is still that job
   * (same token) and its history has room; changes no protocol field.
   */
  recordMismatch?(existing: JobItem, event: MismatchEvent, options?: StoreCallOptions): Promise<void>;
  /** Reads one item (strongly consistent unless `options.consistent` is false). */
  get(dedupKey: string, options?: GetOptions): Promise<JobItem | undefined>;
  /**
   * Operator redrive: makes a job runnable again unless it completed or a live lease holds it: DEAD,
   * RETRY_WAIT, or IN_PROGRESS whose lease ended before `leaseEndedBefore` (default `now`; a worker
   * died, or its dead marking failed) becomes RETRY_WAIT with attempts 0, no owner, no `deadReason`; the
   * checkpoint is kept. False when refused or absent. An operator's clock may run ahead of the workers',
   * so redrive passes a `leaseEndedBefore` well before its `now`. Appends a `redrive` history event
   * (`by`; default `unknown`) and sets the `problems` index keys (job-history.ts). With `planned` (the
   * version the caller read and planned from), refused when the item moved since: a claim in between
   * (a fresh send resetting a dead key, a takeover) made it another job's, or another run's. A reset
   * whose answer was lost is still true when the item is as it left it. An edited redrive (`by.edited`)
   * stores `by.payloadHash` as the job's payload hash, or removes the hash when none is given (the next
   * claim stores its message's), so the operator's edit is never refused as another payload.
   */
  resetForRedrive(
    dedupKey: string,
    now: number,
    leaseEndedBefore?: number,
    by?: RedriveBy,
    planned?: number,
  ): Promise<boolean>;
  /**
   * Undoes a redrive's reset whose letter could not be sent back: the item gets `before`'s status,
   * attempts, lease, owner and dead fields again (a DEAD job is DEAD again, listed as dead, its letter
   * still in the DLQ), when it is still as the reset left it (version `resetVersion`, RETRY_WAIT, attempts
   * 0). False when it moved since (a message of the job claimed it: it runs, nothing is to undo). Optional:
   * only the operator's redrive calls it, on the DynamoDB store.
   */
  undoRedrive?(before: JobItem, resetVersion: number, now: number): Promise<boolean>;
  /**
   * Cancels a job (docs/protocol.md, edge C1-C3): one conditional write. A job not finished (IN_PROGRESS,
   * live lease or not, or RETRY_WAIT) becomes CANCELLED in place: owner and token stay, so its holder's
   * next fenced write (renewal, checkpoint, commit, release) is refused with a JobCancelledError; no claim
   * or fast commit takes it again. No item: a tombstone (CANCELLED, no type) is written, so the job's
   * message, when it comes, is dropped. COMPLETED or DEAD: nothing written, answered `finished` with the
   * status. Appends a `cancelled` history event and sets the `problems` index keys. Optional: an operator's
   * and producer's write, which no worker makes (wrappers of the worker's store need not pass it on).
   */
  cancel?(dedupKey: string, request: CancelRequest): Promise<CancelResult>;
}

/** Who cancels a job, why, and when: the `cancelled` history event's fields. */
export interface CancelRequest {
  /** user@host, or the caller's identity. @default 'unknown' */
  readonly by?: string;
  /** Free text, kept (capped) in the history event. */
  readonly reason?: string;
  /** Epoch ms of the cancel. */
  readonly now: number;
}

/** What a cancel found and did. */
export type CancelResult =
  /** The job was unfinished and is CANCELLED now; `wasRunning`: it was IN_PROGRESS (a live lease or not). */
  | {
      readonly outcome: 'cancelled';
      readonly status: 'IN_PROGRESS' | 'RETRY_WAIT';
      readonly wasRunning: boolean;
    }
  /** No item under the key: a tombstone now stops the job's message when it comes. */
  | { readonly outcome: 'tombstone' }
  /** Finished before the cancel: nothing written. */
  | { readonly outcome: 'finished'; readonly status: 'COMPLETED' | 'DEAD' }
  /** Cancelled earlier: nothing written. */
  | { readonly outcome: 'already-cancelled'; readonly status: 'CANCELLED' };

/** The `cancelled` history event of a cancel at `request.now`. */
export function cancelledEvent(request: CancelRequest): HistoryEvent & { readonly e: 'cancelled' } {
  return {
    e: 'cancelled',
    at: request.now,
    by: storableText(request.by ?? 'unknown', CANCEL_TEXT_MAX),
    ...(request.reason ? { reason: storableText(request.reason, CANCEL_TEXT_MAX) } : {}),
  };
}

/** Longest `by` or `reason` a `cancelled` event keeps. */
export const CANCEL_TEXT_MAX = 240;

/** Who redrove a job, and how: the `redrive` history event's fields (job-history.ts). */
export interface RedriveBy {
  /** user@host, or the caller's identity. */
  readonly by: string;
  /** The dead letter's message id. */
  readonly letter?: string;
  /** The payload was replaced by a corrected one. */
  readonly edited?: boolean;
  /** With `edited`: the corrected payload's hash (decisions/payload-hash.ts), when the type's is known. */
  readonly payloadHash?: string;
}

/** The `redrive` history event of a redrive at `now`. */
export function redriveEvent(now: number, by: RedriveBy): HistoryEvent & { readonly e: 'redrive' } {
  return {
    e: 'redrive',
    at: now,
    by: by.by,
    ...(by.letter ? { letter: by.letter } : {}),
    ...(by.edited ? { edited: true as const } : {}),
  };
}
