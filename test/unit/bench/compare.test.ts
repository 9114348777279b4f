import { describe, expect, it } from 'vitest';
import { itemSizeBytes, refusedWriteUnits, writeUnits } from '../../../bench/compare/capacity.ts';
import { niceMax } from '../../../bench/compare/chart.ts';
import { correctnessProblems } from '../../../bench/compare/checks.ts';
import {
  callLatency,
  designOf,
  draw,
  floorJobsPerSlot,
  latencyModel,
} from '../../../bench/compare/latency-model.ts';
import { BenchUsageError, parseBenchOptions } from '../../../bench/compare/options.ts';
import { costPerMillionJobs, costSplit } from '../../../bench/compare/pricing.ts';
import { counterKeys } from '../../../bench/compare/probe.ts';
import type { RunResult } from '../../../bench/compare/run.ts';
import { checkTargets, summarize } from '../../../bench/compare/summary.ts';
import { planWorkload } from '../../../bench/compare/workload.ts';
import { formatSpread, median, percentile, renderTable, spread } from '../../../bench/report.ts';

describe('bench report helpers', () => {
  it('gives medians, nearest-rank percentiles and spreads', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 95)).toBe(10);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50)).toBe(5);
    expect(formatSpread(spread([10, 12, 11]), 0)).toBe('11 (10-12)');
    expect(formatSpread(spread([]), 0)).toBe('-');
  });

  it('renders aligned tables', () => {
    const text = renderTable(['a', 'bb'], [['xyz', '1']], [false, true]);
    expect(text.split('\n')).toEqual(['a    bb', '---  --', 'xyz   1']);
  });
});

describe('bench options', () => {
  it('defaults to every scenario and consumer, and the CI variant to a race and a kill', () => {
    const full = parseBenchOptions([]);
    expect(full.scenarios.map((s) => s.id)).toContain('workers4');
    expect(full.consumers).toEqual(['bare', 'powertools', 'leased', 'fast']);
    const ci = parseBenchOptions(['--ci']);
    expect(ci.scenarios.map((s) => s.id)).toEqual(['race', 'kill']);
    expect(ci.repeats).toBe(1);
    expect(ci.warmup).toBe(false);
  });

  it('keeps the canonical order whatever order the lists come in', () => {
    expect(parseBenchOptions(['--consumers', 'fast,bare']).consumers).toEqual(['bare', 'fast']);
  });

  it.each([
    [['--repeats', '0']],
    [['--repeats', '1.5']],
    [['--messages', '']],
    [['--scenarios', 'dup10,nope']],
    [['--consumers', '']],
    [['--wat']],
    [['positional']],
  ])('refuses %j with a one-line BenchUsageError', (argv) => {
    expect(() => parseBenchOptions(argv)).toThrow(BenchUsageError);
    try {
      parseBenchOptions(argv);
    } catch (error) {
      expect((error as Error).message).not.toContain('\n');
    }
  });
});

describe('bench workload', () => {
  it('sends every message once: unique jobs plus their duplicates', () => {
    const w = planWorkload({ tag: 't', messages: 1000, duplicates: 0.1, timing: 'after', kills: 3 });
    expect(w.keys).toHaveLength(900);
    const initial = w.waves.flat(2);
    expect(initial).toHaveLength(900);
    expect([...w.afterDone.values()].reduce((a, b) => a + b, 0)).toBe(100);
    expect(w.killKeys).toHaveLength(3);
    for (const key of w.killKeys) expect(w.afterDone.has(key)).toBe(false);
    for (const wave of w.waves) {
      expect(wave.length).toBeLessThanOrEqual(2);
      for (const chunk of wave) expect(chunk.length).toBeLessThanOrEqual(10);
    }
  });

  it('puts a racing copy in its original batch or in the parallel one of the same wave', () => {
    const w = planWorkload({ tag: 't', messages: 200, duplicates: 0.5, timing: 'race', kills: 0 });
    expect(w.afterDone.size).toBe(0);
    let same = 0;
    let parallel = 0;
    for (const wave of w.waves) {
      for (const [c, chunk] of wave.entries()) {
        for (const m of chunk.filter((x) => x.copy === 1)) {
          if (chunk.some((x) => x.key === m.key && x.copy === 0)) same += 1;
          else if (wave[1 - c]?.some((x) => x.key === m.key && x.copy === 0)) parallel += 1;
        }
      }
    }
    expect(same + parallel).toBe(100);
    expect(same).toBe(50);
    expect(w.waves.flat(2)).toHaveLength(200);
  });
});

describe('bench capacity rules', () => {
  it('sizes items by DynamoDB rules and bills refused writes', () => {
    expect(itemSizeBytes({ id: { S: 'abc' } })).toBe(5);
    expect(itemSizeBytes({ n: { N: '12345' } })).toBe(1 + 4);
    expect(writeUnits(0)).toBe(1);
    expect(writeUnits(1025)).toBe(2);
    const big = { id: { S: 'x'.repeat(1500) } };
    expect(
      refusedWriteUnits(
        'PutItem',
        {},
        Object.assign(new Error('x'), { name: 'ConditionalCheckFailedException', Item: big }),
      ),
    ).toBe(2);
    expect(
      refusedWriteUnits(
        'TransactWriteItems',
        { TransactItems: [{}, {}] },
        Object.assign(new Error('x'), {
          name: 'TransactionCanceledException',
          CancellationReasons: [{}, {}],
        }),
      ),
    ).toBe(4);
    expect(
      refusedWriteUnits('UpdateItem', {}, Object.assign(new Error('x'), { name: 'ThrottlingException' })),
    ).toBe(0);
  });

  it('finds the counter keys a write applies, plain or in a transaction, marshalled or not', () => {
    expect(counterKeys('UpdateItem', { TableName: 'c', Key: { id: 'k1' } }, 'c')).toEqual(['k1']);
    expect(counterKeys('UpdateItem', { TableName: 'c', Key: { id: { S: 'k2' } } }, 'c')).toEqual(['k2']);
    expect(counterKeys('UpdateItem', { TableName: 'other', Key: { id: 'k' } }, 'c')).toEqual([]);
    expect(
      counterKeys(
        'TransactWriteItems',
        {
          TransactItems: [
            { Update: { TableName: 'jobs', Key: { dedupKey: 'k' } } },
            { Update: { TableName: 'c', Key: { id: 'k3' } } },
          ],
        },
        'c',
      ),
    ).toEqual(['k3']);
  });

  it("draws latencies whose p50 and p99 are the model's", () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 48271) % 2147483647;
      return seed / 2147483647;
    };
    const model = latencyModel('aws');
    const draws = Array.from({ length: 20000 }, () => draw(model.write, random)).sort((a, b) => a - b);
    expect(draws[10000]).toBeGreaterThan(7.6 * 0.95);
    expect(draws[10000]).toBeLessThan(7.6 * 1.05);
    expect(draws[19800]).toBeGreaterThan(16.2 * 0.9);
    expect(draws[19800]).toBeLessThan(16.2 * 1.1);
  });

  it('sizes a transaction by its items, and the sensitivity variants by a write', () => {
    const aws = latencyModel('aws');
    expect(aws.transaction(5).p50).toBeCloseTo(25.3, 6);
    expect(aws.transaction(5).p99).toBeCloseTo(92.5, 6);
    expect(aws.transaction(1)).toEqual(aws.write);
    expect(latencyModel('tx2x').transaction(2).p50).toBeCloseTo(15.2, 6);
    expect(latencyModel('tx3x').transaction(2).p99).toBeCloseTo(48.6, 6);
    expect(
      callLatency(aws, 'DynamoDB', 'TransactWriteItems', { TransactItems: [{}, {}, {}, {}, {}] }),
    ).toEqual(aws.transaction(5));
    expect(callLatency(aws, 'DynamoDB', 'DescribeTable', {})).toBeUndefined();
  });

  it('puts each design under the floor its sequential round trips allow', () => {
    const model = latencyModel('aws');
    const one = floorJobsPerSlot(model, designOf('bare', 'effect'), 10);
    const three = floorJobsPerSlot(model, designOf('powertools', 'effect'), 10);
    const fast = floorJobsPerSlot(model, designOf('fast', 'effect'), 10);
    const leased = floorJobsPerSlot(model, designOf('leased', 'effect'), 10);
    expect(one).toBeGreaterThan(fast);
    expect(fast).toBeGreaterThan(leased);
    expect(fast).toBeGreaterThan(three);
    // Not leased > Powertools: the slowest of 10 records decides a batch, and a transaction's p99 (35 ms
    // at 2 items) weighs more there than a third write's.
    // 10 records in parallel: the batch lasts as long as the slowest, above a single p50.
    expect(one).toBeLessThan(10_000 / 7.6);
  });

  it("splits a job's cost into Lambda, DynamoDB and SQS", () => {
    const split = costSplit({ wru: 4, rru: 0, sqsRequests: 0.2 }, { billedMs: 10, invocations: 0.1 });
    // 10 ms at 256 MB = 0.0025 GB-s per job; a tenth of an invocation.
    expect(split.lambda).toBeCloseTo(1e6 * 0.0025 * 0.0000133334 + 0.1 * 0.2, 6);
    expect(split.dynamodb).toBeCloseTo(2.5, 6);
    expect(split.sqs).toBeCloseTo(0.08, 6);
    expect(split.total).toBeCloseTo(split.lambda + 2.58, 6);
  });

  it('prices a job', () => {
    expect(costPerMillionJobs({ wru: 4, rru: 0, sqsRequests: 0.2 })).toBeCloseTo(2.58, 6);
  });
});

function run(partial: Partial<RunResult> & Pick<RunResult, 'consumer' | 'scenario' | 'repeat'>): RunResult {
  return {
    workers: 2,
    messages: 100,
    uniqueJobs: 100,
    startedAt: '',
    loadAverage1m: 0,
    wallMs: 1000,
    timedOut: false,
    jobsPerSecond: 100,
    latencyMs: [10, 20, 30],
    requests: { 'SQS.ReceiveMessage': 10, 'SQS.DeleteMessageBatch': 10, 'DynamoDB.TransactWriteItems': 100 },
    capacity: {
      wru: 400,
      rru: 0,
      reportedWru: 400,
      reportedRru: 0,
      computedWru: 0,
      reportedRequests: 100,
      computedRequests: 0,
      byCommand: {},
    },
    stats: {},
    effects: { applied: 100, doubles: 0, missing: 0, jobsWithDoubles: 0 },
    kills: { planned: 0, happened: 0 },
    lambda: { invocations: 10, handlerMs: 500, billedMs: 505 },
    deaths: [],
    workersStarted: 2,
    batchItemFailures: 0,
    batchErrors: 0,
    deadLetters: 0,
    leftInQueue: 0,
    ...partial,
  };
}

describe('bench summaries and checks', () => {
  it('pairs ratios within a round and reports targets without asserting them', () => {
    const results = [
      run({ consumer: 'bare', scenario: 'dup10', repeat: 0, jobsPerSecond: 200 }),
      run({ consumer: 'powertools', scenario: 'dup10', repeat: 0, jobsPerSecond: 100 }),
      run({ consumer: 'fast', scenario: 'dup10', repeat: 0, jobsPerSecond: 150 }),
      run({ consumer: 'bare', scenario: 'dup10', repeat: 1, jobsPerSecond: 100 }),
      run({ consumer: 'powertools', scenario: 'dup10', repeat: 1, jobsPerSecond: 50 }),
      run({ consumer: 'fast', scenario: 'dup10', repeat: 1, jobsPerSecond: 50 }),
    ];
    const summaries = summarize(results, ['dup10'], ['bare', 'powertools', 'fast']);
    const fast = summaries.find((s) => s.consumer === 'fast');
    expect(fast?.vsPowertools.median).toBeCloseTo(1.25);
    expect(fast?.vsBare.median).toBeCloseTo(0.625);
    expect(fast?.wruPerJob.median).toBe(4);
    expect(fast?.sqsRequestsPerJob.median).toBeCloseTo(0.2);
    const targets = checkTargets(summaries);
    expect(targets.find((t) => t.target.startsWith('leaseq fast path >= 1.2x'))?.met).toBe(true);
    expect(targets.find((t) => t.target.includes('floor, 4'))?.met).toBeUndefined(); // no dup0 runs
  });

  it('flags lost effects, leaseq doubles, missed kills and leftovers, never speed', () => {
    const ok = run({ consumer: 'leased', scenario: 'kill', repeat: 0, jobsPerSecond: 1 });
    expect(correctnessProblems([ok], [], { queues: [], tables: [] })).toEqual([]);
    const bad = [
      run({
        consumer: 'leased',
        scenario: 'kill',
        repeat: 0,
        effects: { applied: 101, doubles: 1, missing: 0, jobsWithDoubles: 1 },
      }),
      run({
        consumer: 'bare',
        scenario: 'kill',
        repeat: 0,
        effects: { applied: 120, doubles: 20, missing: 0, jobsWithDoubles: 20 },
      }),
      run({ consumer: 'powertools', scenario: 'kill', repeat: 0, kills: { planned: 2, happened: 1 } }),
    ];
    const problems = correctnessProblems(bad, [], { queues: ['q'], tables: [] });
    expect(problems).toHaveLength(3);
    expect(problems.join('\n')).not.toContain('bare');
  });

  it('rounds chart axes up to 1, 2, 2.5 or 5 times a power of ten', () => {
    expect(niceMax(293)).toBe(500);
    expect(niceMax(3.3)).toBe(5);
    expect(niceMax(0)).toBe(1);
    expect(niceMax(180)).toBe(200);
  });
});
