import { describe, expect, it } from 'vitest';
import type { JobItem } from '../../../../shared/core/contract/job-item.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import {
  claimCounters,
  expiresAtSeconds,
  isClaimable,
  leasedRunOnly,
  leaseEnd,
  leaseOver,
} from '../../../../shared/core/decisions/lease-arithmetic.ts';

const NOW = 1_800_000_000_000;

function item(overrides: Partial<JobItem> = {}): JobItem {
  return {
    dedupKey: 'order-1',
    status: JobStatus.InProgress,
    owner: 'worker-a',
    leaseUntil: NOW - 1,
    token: 7,
    attempts: 1,
    version: 4,
    messageId: 'm-1',
    ...overrides,
  };
}

describe('Module: lease-arithmetic', () => {
  it('ends a lease leaseMs after now, and holds it through its last millisecond', () => {
    expect(leaseEnd(NOW, 30_000)).toBe(NOW + 30_000);
    expect(leaseOver(NOW, NOW)).toBe(false);
    expect(leaseOver(NOW - 1, NOW)).toBe(true);
  });

  it('lets a claim take a new key, or an unfinished job whose lease or backoff is over', () => {
    expect(isClaimable(undefined, NOW)).toBe(true);
    expect(isClaimable(item(), NOW)).toBe(true);
    expect(isClaimable(item({ status: JobStatus.RetryWait }), NOW)).toBe(true);
    expect(isClaimable(item({ leaseUntil: NOW }), NOW)).toBe(false);
    expect(isClaimable(item({ status: JobStatus.Completed }), NOW)).toBe(false);
    expect(isClaimable(item({ status: JobStatus.Dead, leaseUntil: 0 }), NOW)).toBe(false);
  });

  it('keeps checkpointed jobs and used-up attempts to leased runs', () => {
    expect(leasedRunOnly(undefined, 3)).toBe(false);
    expect(leasedRunOnly(item({ attempts: 2 }), 3)).toBe(false);
    expect(leasedRunOnly(item({ attempts: 3 }), 3)).toBe(true);
    expect(leasedRunOnly(item({ checkpoint: { step: 's', done: ['s'], data: {}, at: NOW } }), 3)).toBe(true);
  });

  it('counts a claim up from the old item, and a new item’s token from the clock', () => {
    expect(claimCounters(undefined, NOW)).toEqual({ token: NOW + 1, attempts: 1, version: 1 });
    expect(claimCounters(item(), NOW)).toEqual({ token: 8, attempts: 2, version: 5 });
  });

  it('puts the TTL in whole seconds, rounded up, ttlSeconds after the time', () => {
    expect(expiresAtSeconds(1_000, 60)).toBe(61);
    expect(expiresAtSeconds(1_001, 60)).toBe(62);
  });
});
