import { describe, expect, it } from 'vitest';
import { MetricName } from '../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../../shared/core/observe/metrics.ts';
import { operationalSmells, poolsOf } from '../../../shared/ops/smells.ts';
import type { PoolMetricsFile } from '../../../shared/runner/worker-pool.ts';

function pool(workers: { id: string; fill: (m: InMemoryMetrics) => void }[]): PoolMetricsFile {
  return {
    pid: 1,
    updatedAt: Date.now(),
    workers: workers.map(({ id, fill }) => {
      const m = new InMemoryMetrics();
      fill(m);
      return { id, alive: true, ...m.snapshot() };
    }),
  };
}

describe('Function: operationalSmells', () => {
  it('says nothing is wrong for a healthy pool', () => {
    const healthy = (m: InMemoryMetrics) => {
      m.count(MetricName.MessageReceived, 110);
      m.count(MetricName.JobClaimed, 100);
      m.count(MetricName.JobSucceeded, 100);
      for (let i = 0; i < 100; i++) m.observe(MetricName.StoreLatency, 4, { operation: 'claim' });
    };
    const smells = operationalSmells([
      pool([
        { id: 'w1', fill: healthy },
        { id: 'w2', fill: healthy },
      ]),
    ]);
    expect(smells?.pingPong.receivesPerAttempt).toBeCloseTo(1.1);
    expect(smells?.pingPong.warning).toBeUndefined();
    expect(smells?.starvation.warning).toBeUndefined();
    expect(smells?.storeLatency).toEqual([
      expect.objectContaining({ operation: 'claim', calls: 200, p50Ms: 4, p99Ms: 4, timeouts: 0 }),
    ]);
    expect(smells?.storeLatency[0]?.warning).toBeUndefined();
  });

  it('warns in plain words about ping-pong, a starved worker and a slow store', () => {
    const busy = (m: InMemoryMetrics) => {
      m.count(MetricName.MessageReceived, 400);
      m.count(MetricName.JobClaimed, 100);
      m.count(MetricName.HandBack, 250);
      m.count(MetricName.JobSucceeded, 100);
      for (let i = 0; i < 90; i++) m.observe(MetricName.StoreLatency, 5, { operation: 'renew' });
      for (let i = 0; i < 10; i++) m.observe(MetricName.StoreLatency, 4000, { operation: 'renew' });
      m.count(MetricName.StoreTimeout, 5, { operation: 'renew' });
    };
    const idle = (m: InMemoryMetrics) => m.count(MetricName.JobSucceeded, 5);
    const smells = operationalSmells([
      pool([
        { id: 'w1', fill: busy },
        { id: 'w2', fill: idle },
      ]),
    ]);
    expect(smells?.pingPong.warning).toMatch(/ping-pong: 4\.0 receives per attempt \(250 given back/);
    expect(smells?.starvation.warning).toMatch(/starved: the busiest committed 20\.0x/);
    expect(smells?.storeLatency[0]?.warning).toMatch(/slow for renew: p99 up to 4000 ms, 5\.0 %/);
  });

  it('is undefined when no pool reported', () => {
    expect(operationalSmells([])).toBeUndefined();
  });
});

describe('Function: poolsOf', () => {
  const arn = 'arn:aws:sqs:us-east-1:000000000000:shop-jobs';
  const at = (target: PoolMetricsFile['target']): PoolMetricsFile => ({
    ...pool([]),
    ...(target ? { target } : {}),
  });

  it("keeps the pools of the target's queue at its endpoint only", () => {
    const mine = at({ endpoint: 'http://127.0.0.1:4566', queueArn: arn });
    const files = [
      mine,
      at({ endpoint: 'http://127.0.0.1:4566', queueArn: `${arn}-other` }),
      at({ endpoint: 'http://127.0.0.1:4567', queueArn: arn }),
      at({ endpoint: null, queueArn: arn }),
      at(undefined),
    ];
    expect(poolsOf(files, { endpoint: 'http://127.0.0.1:4566/', queueArn: arn })).toEqual([mine]);
    expect(poolsOf(files, { endpoint: null, queueArn: arn })).toEqual([files[3]]);
  });
});
