import { describe, expect, it } from 'vitest';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import type { JobLease } from '../../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { fenceRefusal, holdsFence } from '../../../../shared/core/decisions/fence-decision.ts';
import { LeaseLostError } from '../../../../shared/errors.ts';

const lease: JobLease = {
  dedupKey: 'order-1',
  owner: 'worker-a',
  token: 7,
  attempts: 1,
  messageId: 'm-1',
  version: 2,
  leaseUntil: 0,
};

function item(overrides: Partial<JobItem> = {}): JobItem {
  return {
    dedupKey: 'order-1',
    status: JobStatus.InProgress,
    owner: 'worker-a',
    leaseUntil: 0,
    token: 7,
    attempts: 1,
    version: 2,
    messageId: 'm-1',
    ...overrides,
  };
}

describe('Module: fence-decision', () => {
  it('holds while owner, token and IN_PROGRESS all match', () => {
    expect(holdsFence(item(), lease)).toBe(true);
    expect(holdsFence(item({ owner: 'worker-b' }), lease)).toBe(false);
    expect(holdsFence(item({ token: 8 }), lease)).toBe(false);
    expect(holdsFence(item({ status: JobStatus.Completed }), lease)).toBe(false);
  });

  it('names what took the job, and says when this very lease completed it', () => {
    const lost = fenceRefusal(lease, 'renew', item({ owner: 'worker-b', token: 8 }));
    expect(lost).toBeInstanceOf(LeaseLostError);
    expect(lost.message).toMatch(/renew refused: item now has owner worker-b, token 8/);
    expect(lost.completedByThisLease).toBe(false);
    expect(fenceRefusal(lease, 'release', item({ status: JobStatus.Completed })).completedByThisLease).toBe(
      true,
    );
    const gone = fenceRefusal(lease, 'complete', undefined, new Error('cause'));
    expect(gone.message).toMatch(/the job item is gone/);
    expect(gone.cause).toBeInstanceOf(Error);
  });
});
