// The job lease's arithmetic that both job stores (DynamoDB and in-memory) compute: when a lease ends,
// when it is over, what a claim counts up, and when TTL may remove the item. The DynamoDB conditions say
// the same in expressions (core/protocol/claim.ts); keep the two in step.

import type { JobItem } from '../contract/job-item.ts';
import { JobStatus } from '../contract/statuses.ts';

/** The end (epoch ms) of a lease taken or renewed at `now` for `leaseMs`. */
export function leaseEnd(now: number, leaseMs: number): number {
  return now + leaseMs;
}

/**
 * True when a lease (or a backoff) ending at `leaseUntil` is over at `now`. Strictly before: a lease
 * still holds at its last millisecond, as the claim's condition `leaseUntil < :now` says.
 */
export function leaseOver(leaseUntil: number, now: number): boolean {
  return leaseUntil < now;
}

/** The claim's condition on the lease: no item, or one not finished whose lease (or backoff) is over (its type: `collides`, claim-decision.ts). */
export function isClaimable(old: JobItem | undefined, now: number): boolean {
  return (
    old === undefined ||
    (old.status !== JobStatus.Completed &&
      old.status !== JobStatus.Dead &&
      old.status !== JobStatus.Cancelled &&
      leaseOver(old.leaseUntil, now))
  );
}

/**
 * True when only a leased claim may take the job, never a fast commit: it has a checkpoint (its steps'
 * effects are committed; a leased run resumes from them), or its attempts are used up or its
 * dead-lettering is unfinished (the claim then dead-letters it).
 */
export function leasedRunOnly(
  old: Pick<JobItem, 'checkpoint' | 'attempts' | 'deadReason'> | undefined,
  maxAttempts: number,
): boolean {
  return (
    old?.checkpoint !== undefined || old?.deadReason !== undefined || (old?.attempts ?? 0) >= maxAttempts
  );
}

/** What a claim's write counts up over the item it replaces. */
export interface ClaimCounters {
  readonly token: number;
  readonly attempts: number;
  readonly version: number;
}

/**
 * The counters a claim at `now` writes over `old` (undefined: no item). The token of a new item starts
 * from the clock, so it keeps growing after TTL deleted an old item (whose tokens were all issued long
 * before it expired).
 */
export function claimCounters(
  old: Pick<JobItem, 'token' | 'attempts' | 'version'> | undefined,
  now: number,
): ClaimCounters {
  return {
    token: (old?.token ?? now) + 1,
    attempts: (old?.attempts ?? 0) + 1,
    version: (old?.version ?? 0) + 1,
  };
}

/** The TTL attribute (epoch seconds): `ttlSeconds` after `fromMs`, rounded up to the next second. */
export function expiresAtSeconds(fromMs: number, ttlSeconds: number): number {
  return Math.ceil(fromMs / 1000) + ttlSeconds;
}
