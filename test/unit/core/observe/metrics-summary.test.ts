import { describe, expect, it } from 'vitest';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics, quantile } from '../../../../shared/core/observe/metrics.ts';

describe('InMemoryMetrics observations', () => {
  it('keeps a histogram whose quantiles are good to a bucket', () => {
    const m = new InMemoryMetrics();
    for (let i = 0; i < 98; i++) m.observe(MetricName.StoreLatency, 3, { operation: 'claim' });
    m.observe(MetricName.StoreLatency, 700, { operation: 'claim' });
    m.observe(MetricName.StoreLatency, 2500, { operation: 'claim' });
    const s = m.snapshot().observations['StoreLatency{operation=claim}'];
    if (!s) throw new Error('no summary');
    expect(s.count).toBe(100);
    expect(quantile(s, 0.5)).toBe(5); // the 2-5 ms bucket
    expect(quantile(s, 0.99)).toBe(1000); // the 500-1000 ms bucket
    expect(quantile(s, 1)).toBe(2500); // capped by the largest observation
  });
});
