import { Logger } from '@aws-lambda-powertools/logger';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../../../shared/core/contract/defaults.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { type JobProcessorOptions, resolveSettings } from '../../../../shared/core/pipeline/settings.ts';
import { ERROR_TEXT_MAX } from '../../../../shared/error-text.ts';
import { InMemoryJobStore } from '../../../../shared/testing/in-memory-job-store.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';

function options(extra: Partial<JobProcessorOptions> = {}): JobProcessorOptions {
  return {
    store: new InMemoryJobStore(),
    queue: new InMemoryQueue(),
    registry: new JobRegistry(),
    worker: 'w1',
    logger: new Logger({ logLevel: 'SILENT' }),
    ...extra,
  };
}

describe('Function: resolveSettings', () => {
  it('applies the defaults written in contract/defaults.ts', () => {
    // Act
    const s = resolveSettings(options());
    // Assess
    expect(s.leaseMs).toBe(DEFAULTS.leaseMs);
    expect(s.heartbeatMs).toBe(Math.floor(DEFAULTS.leaseMs / 3));
    expect(s.maxAttempts).toBe(DEFAULTS.maxAttempts);
    expect(s.optimisticTries).toBe(DEFAULTS.optimisticTries);
    expect(s.maxRefunds).toBe(DEFAULTS.maxRefunds);
  });

  // Defect 5 (issue 18): a 300-999 ms lease was accepted here and then every record handed back.
  it('refuses a lease below DEFAULTS.minLeaseMs in one line naming the minimum, and accepts the minimum', () => {
    expect(() => resolveSettings(options({ leaseMs: 500 }))).toThrow(
      new RangeError('leaseMs must be at least 1000 (ms), received 500'),
    );
    expect(resolveSettings(options({ leaseMs: DEFAULTS.minLeaseMs })).leaseMs).toBe(1000);
  });

  it('refuses a refund budget that is not a whole number >= 0', () => {
    expect(() => resolveSettings(options({ maxRefunds: -1 }))).toThrow(
      new RangeError('maxRefunds must be an integer >= 0, received -1'),
    );
    expect(resolveSettings(options({ maxRefunds: 0 })).maxRefunds).toBe(0);
  });

  it.each([
    ['maxAttempts', 0],
    ['maxAttempts', 1.5],
    ['optimisticTries', 0],
    ['optimisticTries', 2.5],
    ['optimisticTries', Number.NaN],
  ] as const)('refuses %s %s with the value received and the value expected', (name, value) => {
    expect(() => resolveSettings(options({ [name]: value }))).toThrow(
      new RangeError(`${name} must be an integer >= 1, received ${value}`),
    );
  });

  it('refuses a heartbeat that is not shorter than the lease', () => {
    expect(() => resolveSettings(options({ leaseMs: 3000, heartbeatMs: 3000 }))).toThrow(RangeError);
  });

  it('builds errorText from redactError: identity by default, the hook applied, capped', () => {
    const error = new Error(`card 4111111111111111 ${'x'.repeat(2000)}`);
    const plain = resolveSettings(options()).errorText(error);
    expect(plain.startsWith('Error: card 4111111111111111 xxx')).toBe(true);
    expect(plain).toHaveLength(ERROR_TEXT_MAX);
    const masked = resolveSettings(options({ redactError: (t) => t.replace(/\d/g, '#') })).errorText(error);
    expect(masked.startsWith('Error: card ################ xxx')).toBe(true);
    expect(masked).toHaveLength(ERROR_TEXT_MAX);
  });

  it('refuses a redactError that is not a function', () => {
    expect(() =>
      resolveSettings(options({ redactError: 'mask' as unknown as JobProcessorOptions['redactError'] })),
    ).toThrow(new TypeError('redactError must be a function, received string'));
  });
});
