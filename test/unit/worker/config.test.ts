import { Logger } from '@aws-lambda-powertools/logger';
import { describe, expect, it } from 'vitest';
import { JobRegistry } from '../../../shared/core/model/registry.ts';
import { resolveSettings } from '../../../shared/core/pipeline/settings.ts';
import { ConfigError } from '../../../shared/errors.ts';
import { InMemoryQueue } from '../../../shared/testing/in-memory-queue.ts';
import { workerConfigFromEnv, workerSettingsFromEnv } from '../../../shared/worker/config.ts';
import { memoryStores } from '../../support/memory-stores.ts';

const NAMES = {
  LEASEQ_JOBS_QUEUE_URL: 'q',
  LEASEQ_DLQ_URL: 'd',
  LEASEQ_JOBS_TABLE: 'j',
  LEASEQ_LEASES_TABLE: 'l',
};

/** Whether the processor (what a Lambda builds from the config) accepts these settings. */
function processorAccepts(leaseMs: number, maxAttempts: number): boolean {
  try {
    resolveSettings({
      store: memoryStores().store,
      queue: new InMemoryQueue(),
      registry: new JobRegistry(),
      worker: 'w',
      logger: new Logger({ logLevel: 'SILENT' }),
      leaseMs,
      maxAttempts,
    });
    return true;
  } catch {
    return false;
  }
}

describe('Function: workerConfigFromEnv', () => {
  it.each([
    ['LEASEQ_LEASE_MS', '200'],
    ['LEASEQ_LEASE_MS', '299'],
    ['LEASEQ_MAX_ATTEMPTS', '0'],
    ['LEASEQ_MAX_ATTEMPTS', '2.5'],
  ])('refuses %s=%s at start, naming the variable, as the processor would refuse it', (name, value) => {
    expect(() => workerConfigFromEnv({ ...NAMES, [name]: value })).toThrow(ConfigError);
    expect(() => workerConfigFromEnv({ ...NAMES, [name]: value })).toThrow(name);
  });

  it('accepts exactly what the processor accepts, at the edges of the lease and attempt ranges', () => {
    for (const leaseMs of [299, 300, 301, 500, 3_600_001]) {
      const accepted = (() => {
        try {
          workerConfigFromEnv({ ...NAMES, LEASEQ_LEASE_MS: String(leaseMs) });
          return true;
        } catch {
          return false;
        }
      })();
      expect(accepted, `LEASEQ_LEASE_MS=${leaseMs}`).toBe(processorAccepts(leaseMs, 5));
    }
    for (const maxAttempts of [0, 1, 100, 101]) {
      const accepted = (() => {
        try {
          workerConfigFromEnv({ ...NAMES, LEASEQ_MAX_ATTEMPTS: String(maxAttempts) });
          return true;
        } catch {
          return false;
        }
      })();
      expect(accepted, `LEASEQ_MAX_ATTEMPTS=${maxAttempts}`).toBe(processorAccepts(30_000, maxAttempts));
    }
  });

  it('counts the worker id in characters (code points), as the zod schema it replaced did', () => {
    const id = '\u{1F642}'.repeat(128); // 256 UTF-16 units, 128 characters
    expect(workerConfigFromEnv({ ...NAMES, LEASEQ_WORKER_ID: id }).workerId).toBe(id);
    expect(() => workerConfigFromEnv({ ...NAMES, LEASEQ_WORKER_ID: `${id}x` })).toThrow(
      /LEASEQ_WORKER_ID is longer than 128 characters/,
    );
  });

  it.each([
    [
      'LEASEQ_MAX_ATTEMPTS',
      '-1e300',
      'LEASEQ_MAX_ATTEMPTS must be an integer; LEASEQ_MAX_ATTEMPTS must be > 0',
    ],
    [
      'LEASEQ_PAYLOAD_MAX_BYTES',
      '-9007199254740993',
      'LEASEQ_PAYLOAD_MAX_BYTES is not a whole number; LEASEQ_PAYLOAD_MAX_BYTES is not above 0',
    ],
    ['LEASEQ_PAYLOAD_BUCKET', '\u{1F642}\u{1F642}', 'LEASEQ_PAYLOAD_BUCKET is not a bucket name'],
  ])('refuses %s=%j with the messages the zod schema gave', (variable, value, message) => {
    expect(() => workerConfigFromEnv({ ...NAMES, [variable]: value })).toThrow(
      `invalid worker configuration: ${message}`,
    );
  });

  it('names every bad setting in one message', () => {
    expect(() =>
      workerConfigFromEnv({ ...NAMES, LEASEQ_LEASE_MS: '10', LEASEQ_BATCH_CONCURRENCY: 'x' }),
    ).toThrow(/LEASEQ_BATCH_CONCURRENCY.*; .*LEASEQ_LEASE_MS|LEASEQ_LEASE_MS.*; .*LEASEQ_BATCH_CONCURRENCY/);
  });
});

describe('Function: workerSettingsFromEnv', () => {
  it("reads the body limit (default: the construct queue's) and the claim-check bucket", () => {
    expect(workerConfigFromEnv(NAMES)).toMatchObject({ maxBodyBytes: 1_015_808 });
    expect(workerConfigFromEnv(NAMES).payloadBucket).toBeUndefined();
    expect(
      workerConfigFromEnv({ ...NAMES, LEASEQ_MAX_BODY_BYTES: '200000', LEASEQ_PAYLOAD_BUCKET: 'big-bodies' }),
    ).toMatchObject({ maxBodyBytes: 200_000, payloadBucket: 'big-bodies' });
    for (const bad of ['1000', '1048577', 'lots']) {
      expect(() => workerConfigFromEnv({ ...NAMES, LEASEQ_MAX_BODY_BYTES: bad }), bad).toThrow(
        /^invalid worker configuration: LEASEQ_MAX_BODY_BYTES must be/,
      );
    }
    expect(() =>
      workerSettingsFromEnv({ LEASEQ_MAX_BODY_BYTES: '5' }, { maxBodyBytes: '--max-body-bytes' }),
    ).toThrow(/^invalid worker configuration: --max-body-bytes must be an integer from 1024 to 1048576/);
  });

  it('needs no resource names, and names a setting by the label given (a flag)', () => {
    expect(workerSettingsFromEnv({ LEASEQ_LEASE_MS: '1500' }).leaseMs).toBe(1500);
    expect(() => workerSettingsFromEnv({ LEASEQ_LEASE_MS: '500' }, { leaseMs: '--lease-ms' })).toThrow(
      /^invalid worker configuration: --lease-ms must be at least 1000 \(ms\), received 500$/,
    );
  });
});
