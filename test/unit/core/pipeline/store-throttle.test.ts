import { createHash } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import {
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { InMemoryMetrics } from '../../../../shared/core/observe/metrics.ts';
import { JobProcessor } from '../../../../shared/core/pipeline/processor.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../../../shared/testing/in-memory-queue.ts';
import { memoryStores } from '../../../support/memory-stores.ts';

// DynamoDB throttling a leaseq item (its partition over 1,000 WCU a second): the worker counts
// StoreThrottled by the item's kind and logs the key's hash, never the key.

const hash = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 12);

function setup() {
  const job = defineJob({
    type: 'test.hot',
    payload: z.object({ tenant: z.string() }),
    rateLimit: { key: (p) => p.tenant, limit: 100, perSeconds: 1 },
    run: async () => ({}),
  });
  const { doc, store, rates } = memoryStores();
  const queue = new InMemoryQueue();
  const metrics = new InMemoryMetrics();
  const logger = new Logger({ logLevel: 'SILENT' });
  const warn = vi.spyOn(logger, 'warn');
  const processor = new JobProcessor({
    store,
    queue,
    registry: JobRegistry.of([job]),
    rates,
    metrics,
    worker: 'w',
    logger,
  });
  queue.send(
    JSON.stringify(
      makeEnvelope({ id: 'e-1', type: 'test.hot', dedupKey: 'acct-secret-1', payload: { tenant: 'acme' } }),
    ),
  );
  const [record] = queue.receive(1);
  if (!record) throw new Error('expected a record');
  const throttled = () => [...metrics.counters].filter(([name]) => name.startsWith('StoreThrottled')).sort();
  const lines = () =>
    warn.mock.calls
      .filter(([message]) => String(message).startsWith('DynamoDB throttled a leaseq item'))
      .map(([, extra]) => extra as Record<string, unknown>);
  return { doc, processor, record, metrics, throttled, lines, warn };
}

const hotKey = () =>
  new ProvisionedThroughputExceededException({
    message: 'Throughput exceeds the current capacity for one or more partitions of your table or index',
    $metadata: { httpStatusCode: 400 },
    ThrottlingReasons: [{ reason: 'TableWriteKeyRangeThroughputExceeded', resource: 'arn:x' }],
  });

describe('A throttled leaseq item', () => {
  it('a rate log: StoreThrottled by kind rate, the item key hashed in the log', async () => {
    const { doc, processor, record, metrics, throttled, lines, warn } = setup();
    doc.faults.failNext('rate-take', hotKey());
    const out = await processor.process(record);
    expect(out.action).toBe('store-unavailable');
    expect(metrics.counters.get('StoreUnavailable')).toBe(1);
    expect(throttled()).toEqual([
      ['StoreThrottled', 1],
      ['StoreThrottled{itemKind=rate}', 1],
    ]);
    expect(lines()).toEqual([
      expect.objectContaining({
        itemKind: 'rate',
        keyHash: hash('rate:test.hot:k:acme'),
        operation: 'rate-take',
        throttlingReason: 'TableWriteKeyRangeThroughputExceeded',
      }),
    ]);
    // Never the key itself, nor the tenant.
    expect(JSON.stringify(warn.mock.calls)).not.toContain('acme');
  });

  it('a job item: kind job, the dedup key hashed', async () => {
    const { doc, processor, record, throttled, lines } = setup();
    doc.faults.failNext('claim', 'throttle');
    const out = await processor.process(record);
    expect(out.action).toBe('store-unavailable');
    expect(throttled()).toContainEqual(['StoreThrottled{itemKind=job}', 1]);
    expect(lines()).toEqual([
      expect.objectContaining({ itemKind: 'job', keyHash: hash('acct-secret-1'), operation: 'claim' }),
    ]);
  });

  it('a 500 is an outage, not a throttle', async () => {
    const { doc, processor, record, metrics, throttled, lines } = setup();
    doc.faults.failNext('claim');
    await processor.process(record);
    expect(metrics.counters.get('StoreUnavailable')).toBe(1);
    expect(throttled()).toEqual([]);
    expect(lines()).toEqual([]);
  });

  it('a transaction cancelled with ThrottlingError on an effect is an outage naming kind effect', async () => {
    const { guardStore } = await import('../../../../shared/core/adapters/store-errors.ts');
    const cancelled = new TransactionCanceledException({
      message:
        'Transaction cancelled, please refer cancellation reasons for specific reasons [None, ThrottlingError]',
      $metadata: { httpStatusCode: 400 },
      CancellationReasons: [{ Code: 'None' }, { Code: 'ThrottlingError', Message: 'Throughput exceeds' }],
    });
    const error = await guardStore({ operation: 'complete', key: 'acct-secret-1' }, async () => {
      throw cancelled;
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'StoreUnavailableError', throttle: { itemKind: 'effect' } });
    const onJob = await guardStore({ operation: 'complete', key: 'acct-secret-1' }, async () => {
      throw new TransactionCanceledException({
        message: 'Transaction cancelled [ThrottlingError]',
        $metadata: { httpStatusCode: 400 },
        CancellationReasons: [{ Code: 'ThrottlingError' }],
      });
    }).catch((e: unknown) => e);
    expect(onJob).toMatchObject({
      name: 'StoreUnavailableError',
      throttle: { itemKind: 'job', keyHash: hash('acct-secret-1') },
    });
  });
});
