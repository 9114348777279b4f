import { describe, expect, it } from 'vitest';
import {
  capLeaseToDeadline,
  leaseTiming,
  visibilityForLease,
} from '../../../../shared/core/decisions/lease-timing.ts';

describe('Function: leaseTiming', () => {
  it('renews every third of the lease', () => {
    expect(leaseTiming(30_000)).toEqual({ leaseMs: 30_000, heartbeatMs: 10_000 });
  });
  it('refuses a heartbeat not shorter than the lease', () => {
    expect(() => leaseTiming(1000, 1000)).toThrow(
      /heartbeatMs must be > 0 and < leaseMs \(1000\), received 1000/,
    );
    expect(() => leaseTiming(10)).toThrow(/leaseMs must be a number >= 300, received 10/);
  });
});

describe('Function: visibilityForLease', () => {
  it('covers the lease with whole seconds plus one', () => {
    expect(visibilityForLease(30_000)).toBe(31);
    expect(visibilityForLease(1500)).toBe(3);
  });
});

describe('Function: capLeaseToDeadline', () => {
  it('never lets a lease outlive the deadline', () => {
    expect(capLeaseToDeadline(30_000, 1000, undefined)).toBe(30_000);
    expect(capLeaseToDeadline(30_000, 1000, 6000)).toBe(5000);
    expect(capLeaseToDeadline(30_000, 7000, 6000)).toBe(0);
  });
});
