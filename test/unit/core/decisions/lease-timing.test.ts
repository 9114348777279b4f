import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../../../shared/core/contract/defaults.ts';
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
    expect(() => leaseTiming(10)).toThrow(/leaseMs must be at least 1000 \(ms\), received 10/);
  });
  // Defect 5 (issue 18): leases of 300-999 ms were accepted here but every record was handed back as too
  // close to the deadline. One minimum, DEFAULTS.minLeaseMs, for every check.
  it('accepts exactly DEFAULTS.minLeaseMs and refuses anything shorter, naming the minimum', () => {
    expect(DEFAULTS.minLeaseMs).toBe(1000);
    expect(leaseTiming(DEFAULTS.minLeaseMs)).toEqual({ leaseMs: 1000, heartbeatMs: 333 });
    expect(() => leaseTiming(500)).toThrow(/^leaseMs must be at least 1000 \(ms\), received 500$/);
    expect(() => leaseTiming(999)).toThrow(/at least 1000 \(ms\), received 999/);
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
