import { describe, expect, it } from 'vitest';
import { backoffSeconds, SQS_MAX_VISIBILITY_SECONDS } from '../../../../shared/core/decisions/backoff.ts';

describe('Function: backoffSeconds', () => {
  it('grows exponentially at the top of the jitter range', () => {
    // Prepare
    const top = () => 0.999999;
    const policy = { baseSeconds: 2, capSeconds: 10_000 };

    // Act
    const delays = [1, 2, 3, 4, 5].map((attempt) => backoffSeconds(attempt, policy, top));

    // Assess
    expect(delays).toEqual([2, 4, 8, 16, 32]);
  });

  it('draws uniformly from zero (full jitter)', () => {
    expect(backoffSeconds(5, { baseSeconds: 2, capSeconds: 900 }, () => 0)).toBe(0);
    expect(backoffSeconds(5, { baseSeconds: 2, capSeconds: 900 }, () => 0.5)).toBe(16);
  });

  it('never exceeds the cap, nor the SQS 12 h visibility limit', () => {
    const top = () => 0.999999;
    expect(backoffSeconds(50, { baseSeconds: 2, capSeconds: 900 }, top)).toBe(900);
    expect(backoffSeconds(5000, { baseSeconds: 2, capSeconds: 10 ** 9 }, top)).toBeLessThan(
      SQS_MAX_VISIBILITY_SECONDS,
    );
  });

  it('treats attempt 0 or negative like the first retry', () => {
    const top = () => 0.999999;
    expect(backoffSeconds(0, { baseSeconds: 3, capSeconds: 60 }, top)).toBe(3);
    expect(backoffSeconds(-4, { baseSeconds: 3, capSeconds: 60 }, top)).toBe(3);
  });
});
