/**
 * A job's history, kept on its own item (docs/protocol.md, "History"). Only the rare writes append to it:
 * a failure's release, a takeover, a lost lease, a step's checkpoint, the dead-lettering, a redrive, a
 * dropped copy of a dead job, a dead key run again. A job that succeeds first time writes none: its claim
 * and completion are told by the fields every item has (createdAt, claimedAt, owner, token, completedAt).
 */

/** Most events one item keeps; a writer that would pass it drops the oldest and counts them in `historyDropped`. */
export const HISTORY_MAX = 50;

/** Longest error message an event keeps (the item's own `lastError` keeps more). */
export const HISTORY_MESSAGE_MAX = 240;

/** What every event says: when, and (for a worker's events) which claim wrote it. */
interface EventBase {
  /** Epoch ms. */
  readonly at: number;
  /** The worker, for events a worker wrote. */
  readonly owner?: string;
  /** The fencing token of the claim the event belongs to. */
  readonly token?: number;
  /** The attempt (the item's `attempts` of that claim). */
  readonly attempt?: number;
}

export type HistoryEvent =
  /** An attempt failed and released its lease; the job runs again from `retryAt`. */
  | (EventBase & {
      readonly e: 'failed';
      readonly errorClass: string;
      readonly message: string;
      /** When the message comes back (epoch ms): `retryAt - at` is the backoff chosen. */
      readonly retryAt: number;
      /** The attempt was given back (a store outage is not the job's failure). */
      readonly refunded?: true;
    })
  /** A claim took over a lease that had ended without a release (its holder died, stalled or timed out). */
  | (EventBase & {
      readonly e: 'takeover';
      readonly fromOwner?: string;
      readonly fromToken: number;
      /** When the taken-over lease ended (epoch ms). */
      readonly leaseEndedAt: number;
      /**
       * When the taken-over claim was made (epoch ms), and its attempt: a holder that died before its
       * first write stored no event of its own, so this is all the history keeps of its claim.
       */
      readonly fromClaimedAt?: number;
      readonly fromAttempt?: number;
    })
  /** The holder found its lease gone (fenced out, or it ran out), and why. */
  | (EventBase & { readonly e: 'lease-lost'; readonly why: string })
  /** A step's checkpoint was committed. */
  | (EventBase & { readonly e: 'step'; readonly step: string })
  /** The job was dead-lettered. */
  | (EventBase & {
      readonly e: 'dead';
      readonly reason: string;
      readonly errorClass: string;
      readonly message: string;
    })
  /** An operator made the job runnable again. */
  | (EventBase & {
      readonly e: 'redrive';
      /** Who: the operator's identity as the CLI or UI knows it (user@host, or a caller ARN). */
      readonly by: string;
      /** The dead letter it was sent from (its message id), when there was one. */
      readonly letter?: string;
      /** The payload was replaced by the operator's corrected one. */
      readonly edited?: true;
    })
  /**
   * Copies of a dead job were dropped (counted: one event per run of drops, `count` grows); with `life`,
   * messages a redrive sent for that earlier life of the key, dropped by the job of a later one.
   */
  | (EventBase & {
      readonly e: 'dropped';
      readonly count: number;
      readonly messageId: string;
      readonly life?: number;
    })
  /** A fresh send under a dead job's key ran after the type's `deadKeyTtl`: the item was reset. */
  | (EventBase & { readonly e: 'reset'; readonly wasDeadAt: number })
  /**
   * A message under the key came with another payload (its hash `got`, the job's `hash`):
   * dead-lettered `payload-mismatch` (the job untouched), or (`newJob`) run as a new job of the key.
   */
  | (EventBase & {
      readonly e: 'mismatch';
      readonly messageId: string;
      readonly hash: string;
      readonly got: string;
      readonly newJob?: true;
    })
  /** The job was cancelled (`JobStore.cancel`): it never runs again. */
  | (EventBase & {
      readonly e: 'cancelled';
      /** Who: user@host as the CLI or UI knows it, or what the producer passed. */
      readonly by: string;
      readonly reason?: string;
    });

export type HistoryEventKind = HistoryEvent['e'];

/** The `mismatch` event: a message under the key came with another payload. */
export type MismatchEvent = Extract<HistoryEvent, { readonly e: 'mismatch' }>;

/**
 * The `problems` index: a sparse global secondary index of the `jobs` table that only jobs which ever
 * had a problem enter (a failure, a takeover, a lost lease, dead-lettering, a redrive, a cancel). Its
 * keys are set by those rare writes and never by a first-time success, so the happy path makes no index
 * write; they are not removed on completion (the index also answers "which jobs were retried").
 */
export const PROBLEMS_INDEX = 'problems';
/** Partition key of the index: one of PROBLEM_SHARDS values, from the dedup key's hash. */
export const PROBLEM_SHARD_ATTRIBUTE = 'problemShard';
/** Sort key of the index: epoch ms of the job's last problem event. */
export const PROBLEM_AT_ATTRIBUTE = 'problemAt';
/** The bytes the index keys take on an item at most (names and values: a shard like `p07`, an epoch ms). */
export const PROBLEM_KEYS_UPPER_BYTES = 64;
/**
 * Shards of the index's partition key: a burst of failures (a downstream outage) writes to 16 index
 * partitions, not one (one partition key value takes at most 1,000 writes/s, and a throttled index
 * throttles the table's own writes). A listing queries all 16.
 */
export const PROBLEM_SHARDS = 16;
/** Attributes the index projects: what a listing shows without reading the items. */
export const PROBLEMS_PROJECTION = [
  'status',
  'type',
  'attempts',
  'owner',
  'leaseUntil',
  'lastError',
  'lastErrorClass',
  'deadReason',
  'deadAt',
  'createdAt',
  'claimedAt',
  'updatedAt',
  'completedAt',
] as const;

/** The index shard of a dedup key (FNV-1a over its UTF-16 code units), as its partition key value. */
export function problemShard(dedupKey: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < dedupKey.length; i++) {
    hash ^= dedupKey.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return `p${String(hash % PROBLEM_SHARDS).padStart(2, '0')}`;
}
