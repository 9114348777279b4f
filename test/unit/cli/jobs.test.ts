import { describe, expect, it } from 'vitest';
import type { LeaseItem } from '../../../shared/core/contract/lease-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import {
  type JobSummaryItem,
  jobLeaseView,
  namedLeaseView,
  stuckReason,
  summariseJobs,
} from '../../../shared/ops/jobs.ts';

const now = 10_000_000;
const minute = 60_000;

function item(overrides: Partial<JobSummaryItem> = {}): JobSummaryItem {
  return {
    dedupKey: 'k',
    status: JobStatus.InProgress,
    leaseUntil: now + 20_000,
    token: 7,
    attempts: 1,
    owner: 'w-1',
    claimedAt: now - 10_000,
    ...overrides,
  };
}

describe('Function: stuckReason', () => {
  it('a live lease with recent progress is not stuck', () => {
    expect(stuckReason(item(), now)).toBeUndefined();
  });
  it('an expired IN_PROGRESS lease is stuck (lease-expired); at its exact end it still holds, as the stores say', () => {
    expect(stuckReason(item({ leaseUntil: now - 1 }), now)).toBe('lease-expired');
    expect(stuckReason(item({ leaseUntil: now }), now)).toBeUndefined();
  });
  it('a live lease with no claim or checkpoint for longer than stuckAfter is stuck (no-progress)', () => {
    const old = item({ claimedAt: now - 11 * minute });
    expect(stuckReason(old, now)).toBe('no-progress');
    expect(stuckReason(old, now, 12 * minute)).toBeUndefined();
    // A recent checkpoint is progress.
    expect(stuckReason({ ...old, checkpoint: { step: 'debit', at: now - minute } }, now)).toBeUndefined();
  });
  it('finished items are never stuck', () => {
    for (const status of [JobStatus.Completed, JobStatus.Dead]) {
      expect(stuckReason(item({ status, leaseUntil: 0 }), now)).toBeUndefined();
    }
  });
  // Issue 18 (defect 4): a job stuck in RETRY_WAIT was never reported; the finder looked at IN_PROGRESS only.
  it('a RETRY_WAIT item whose retry is overdue by more than stuckAfter is stuck (retry-overdue)', () => {
    const waiting = { status: JobStatus.RetryWait, owner: undefined };
    // Due in the future, or only just overdue: its message is on its way.
    expect(stuckReason(item({ ...waiting, leaseUntil: now + minute }), now)).toBeUndefined();
    expect(stuckReason(item({ ...waiting, leaseUntil: now - 9 * minute }), now)).toBeUndefined();
    // Overdue for 11 minutes: no message came back to retry it.
    expect(stuckReason(item({ ...waiting, leaseUntil: now - 11 * minute }), now)).toBe('retry-overdue');
    expect(
      stuckReason(item({ ...waiting, leaseUntil: now - 11 * minute }), now, 12 * minute),
    ).toBeUndefined();
    // A redrive sets leaseUntil 0 and updatedAt now: due from the redrive, not from 1970.
    expect(stuckReason(item({ ...waiting, leaseUntil: 0, updatedAt: now - minute }), now)).toBeUndefined();
    expect(stuckReason(item({ ...waiting, leaseUntil: 0, updatedAt: now - 11 * minute }), now)).toBe(
      'retry-overdue',
    );
  });
});

describe('Function: jobLeaseView / namedLeaseView', () => {
  it('shows remaining time (negative when expired), checkpoint step and last progress', () => {
    const view = jobLeaseView(
      item({
        leaseUntil: now - 5000,
        checkpoint: { step: 'debit', at: now - 3000 },
        type: 'ledger.transfer',
      }),
      now,
    );
    expect(view).toEqual({
      dedupKey: 'k',
      type: 'ledger.transfer',
      owner: 'w-1',
      token: 7,
      attempts: 1,
      leaseUntil: now - 5000,
      remainingMs: -5000,
      checkpointStep: 'debit',
      lastProgressAt: now - 3000,
      stuck: 'lease-expired',
    });
  });
  it('tells held, abandoned and free named leases apart', () => {
    const lease = (o: Partial<LeaseItem>): LeaseItem => ({
      leaseKey: 'account#1',
      leaseUntil: now + 1,
      token: 3,
      ...o,
    });
    expect(namedLeaseView(lease({ owner: 'w' }), now).state).toBe('held');
    expect(namedLeaseView(lease({ owner: 'w', leaseUntil: now - 1 }), now).state).toBe('abandoned');
    // The lease store's acquire takes it over only once `leaseUntil < now`.
    expect(namedLeaseView(lease({ owner: 'w', leaseUntil: now }), now).state).toBe('held');
    expect(namedLeaseView(lease({ leaseUntil: 0 }), now).state).toBe('free');
  });
});

describe('Function: summariseJobs', () => {
  it('counts statuses, live and stuck leases, completions per last owner, and the oldest unfinished job', () => {
    const items: JobSummaryItem[] = [
      item({ dedupKey: 'a' }),
      item({ dedupKey: 'b', leaseUntil: now - 1, createdAt: new Date(now - 90_000).toISOString() }),
      item({ dedupKey: 'c', claimedAt: now - 20 * minute }),
      item({ dedupKey: 'd', status: JobStatus.RetryWait, createdAt: new Date(now - 30_000).toISOString() }),
      item({ dedupKey: 'e', status: JobStatus.Completed, owner: 'w-2' }),
      item({ dedupKey: 'f', status: JobStatus.Completed, owner: 'w-2' }),
      item({ dedupKey: 'g', status: JobStatus.Completed, owner: 'w-1' }),
      item({ dedupKey: 'h', status: JobStatus.Dead, owner: undefined }),
      // A COMPLETED job with a created time is not "unfinished".
      item({
        dedupKey: 'i',
        status: JobStatus.Completed,
        owner: 'w-3',
        createdAt: new Date(0).toISOString(),
      }),
    ];
    const summary = summariseJobs(items, now);
    expect(summary).toEqual({
      total: 9,
      byStatus: { IN_PROGRESS: 3, RETRY_WAIT: 1, COMPLETED: 4, DEAD: 1, CANCELLED: 0 },
      live: 1,
      stuck: 2,
      stuckByReason: { 'lease-expired': 1, 'no-progress': 1, 'retry-overdue': 0 },
      completedByWorker: [
        { worker: 'w-2', completed: 2 },
        { worker: 'w-1', completed: 1 },
        { worker: 'w-3', completed: 1 },
      ],
      oldestUnfinishedAgeMs: 90_000,
    });
  });
  it('is all zeros for an empty table', () => {
    const summary = summariseJobs([], now);
    expect(summary.total).toBe(0);
    expect(summary.oldestUnfinishedAgeMs).toBeNull();
    expect(summary.completedByWorker).toEqual([]);
  });
});
