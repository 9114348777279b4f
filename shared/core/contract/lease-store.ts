import type { Effect } from './job-store.ts';

/** Leases-table keys of the concurrency limits' slots start with this; named leases may not. */
export const SLOT_ITEM_PREFIX = 'slot:';

/** A named lease held on a shared resource (`account#42`). */
export interface NamedLease {
  readonly key: string;
  readonly owner: string;
  /** Fencing token: strictly increasing per key, also after the item was deleted. */
  readonly token: number;
  leaseUntil: number;
}

/** What the `leases` table holds for a key. */
export interface LeaseItem {
  readonly leaseKey: string;
  readonly owner?: string;
  readonly leaseUntil: number;
  readonly token: number;
  readonly acquiredAt?: number;
  readonly expiresAt?: number;
}

/**
 * True when `holder`, the item that refused an acquire, was written by that very acquire (`owner` asking
 * at `now`): its write landed, its answer was lost, and the same request was sent again. The owner alone
 * is not enough: a job's retries on one worker share it, and an abandoned attempt may still run.
 */
export function isOwnAcquire(holder: LeaseItem, owner: string, now: number): boolean {
  return holder.owner === owner && holder.acquiredAt === now;
}

export type AcquireResult =
  | { readonly acquired: true; readonly lease: NamedLease }
  | { readonly acquired: false; readonly holder: LeaseItem };

/** The port for named leases. Every operation after acquire is a compare-and-set on owner + token. */
export interface LeaseStore {
  /**
   * One conditional write: takes the lease if nobody holds it or the holder's lease ended. A refusal by
   * the item this same request wrote ({@link isOwnAcquire}: a resend after a lost answer) is acquired.
   */
  tryAcquire(key: string, owner: string, leaseMs: number, now: number): Promise<AcquireResult>;
  /**
   * Extends the lease to `now + leaseMs`, never shortening it (a late renewal leaves a later one's end);
   * throws LeaseLostError when the owner/token no longer match.
   */
  renew(lease: NamedLease, leaseMs: number, now: number): Promise<void>;
  /** Gives the lease up (keeps the token so the next one is larger). No-op when already lost. */
  release(lease: NamedLease): Promise<void>;
  get(key: string): Promise<LeaseItem | undefined>;
  /**
   * The items of `keys` that exist, read together (eventually consistent: a hint of which are free, the
   * acquire's condition decides). Concurrency slots read their scope with it when the first slot tried
   * is busy; without it each slot is tried in turn.
   */
  getMany?(keys: readonly string[]): Promise<LeaseItem[]>;
  /**
   * A ConditionCheck that passes only while `lease` is still held (owner + token), to put into a job's
   * commit transaction: a holder that lost the lock commits nothing.
   */
  fence(lease: NamedLease): Effect;
}
