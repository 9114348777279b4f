import type { HistoryEvent } from './job-history.ts';
import type { JobStatus } from './statuses.ts';

/** Progress a job stored so a retry or takeover resumes from the last safe point. */
export interface Checkpoint {
  /** Name of the last step that finished. */
  readonly step: string;
  /** Every step finished so far, in order. */
  readonly done: readonly string[];
  /** Whatever the job wants back on resume (must be JSON-safe). */
  readonly data?: unknown;
  /** When it was written (epoch ms). */
  readonly at: number;
}

/** One item of the `jobs` table: dedup record, job lease and checkpoint in one place. */
export interface JobItem {
  readonly dedupKey: string;
  readonly status: JobStatus;
  /** Worker holding the lease (absent once released). */
  readonly owner?: string;
  /** Lease end, epoch ms. While in RETRY_WAIT: when the retry is due. */
  readonly leaseUntil: number;
  /** Fencing token: grows on every claim, also after the item was deleted. */
  readonly token: number;
  /** Claims that ran the job. */
  readonly attempts: number;
  /** Attempts refunded (store outages); absent until the first. Bounded by the worker's maxRefunds. */
  readonly refunds?: number;
  /**
   * Attempts given back for optimistic conflicts (another writer changed a row first); absent until the
   * first. Bounded by the worker's maxConflicts; a redrive removes it.
   */
  readonly conflicts?: number;
  /** Bumped on every content change (claim, checkpoint, release, completion); not on lease renewal. */
  readonly version: number;
  /** The message that last claimed the job (or completed it on the fast path). */
  readonly messageId: string;
  /**
   * The id that message was first sent under, when a limit's bounce had re-sent it under `messageId`
   * (decisions/message-identity.ts); absent when the message is its own origin, as for every job whose
   * message was never re-sent.
   */
  readonly originId?: string;
  /**
   * The key's life: how many times a fresh send reset it after a death (E1 starts life 0: absent). A
   * message a redrive sent for one life (`leaseq-life`) claims no other (docs/protocol.md, "Claim refusals").
   */
  readonly life?: number;
  readonly type?: string;
  /**
   * The payload hash of the message its first claim took (decisions/payload-hash.ts): a message of its
   * key with another one is not a copy (docs/protocol.md, "A duplicate with another payload"). Absent:
   * written before hashes, or its type compares no payloads (`onPayloadMismatch: 'copy'`).
   */
  readonly payloadHash?: string;
  readonly checkpoint?: Checkpoint;
  readonly lastError?: string;
  readonly lastErrorClass?: string;
  /**
   * Set by the dead-letter fence (E9): the job is being dead-lettered for this reason (with `lastError`,
   * `lastErrorClass`). A claim that finds it finishes the dead-lettering instead of running the job; a
   * redrive removes it.
   */
  readonly deadReason?: string;
  readonly result?: unknown;
  readonly createdAt?: string;
  readonly claimedAt?: number;
  readonly updatedAt?: number;
  readonly completedAt?: number;
  /** When it was marked DEAD (epoch ms); a dead key runs again after its type's `deadKeyTtl`. */
  readonly deadAt?: number;
  /**
   * Until when (epoch ms) copies of this DEAD job are dropped: `deadAt` + its type's `deadKeyTtl`, written
   * with DEAD. After it a fresh send under the key runs (the item is reset). Absent: dropped until TTL
   * removes the item (the default). Stored rather than looked up, so an operator's tool can tell it.
   */
  readonly deadKeyUntil?: number;
  /** The rare events of its life, oldest first, at most HISTORY_MAX (job-history.ts). Absent until the first. */
  readonly history?: readonly HistoryEvent[];
  /** Events dropped from the front of `history` to keep it bounded. */
  readonly historyDropped?: number;
  /** Key of the sparse `problems` index: set by the first problem event, never by a first-time success. */
  readonly problemShard?: string;
  /** Sort key of the `problems` index: the last problem event (epoch ms). */
  readonly problemAt?: number;
  /** TTL attribute, epoch seconds. */
  readonly expiresAt?: number;
}
