import { describe, expect, it } from 'vitest';
import { batchGetUnits } from '../../../bench/compare/capacity.ts';
import { limitMessage } from '../../../bench/compare/limit-plan.ts';
import { limitsText, summarizeLimits } from '../../../bench/compare/limits-table.ts';
import { parseBenchOptions } from '../../../bench/compare/options.ts';
import { Producer } from '../../../bench/compare/producer.ts';
import type { RunResult } from '../../../bench/compare/run.ts';
import { planWorkload } from '../../../bench/compare/workload.ts';

describe('bench limits scenario: options and workload', () => {
  it('is opt-in: never in the default set, all five variants with --scenarios limits', () => {
    expect(parseBenchOptions([]).limits).toEqual([]);
    expect(parseBenchOptions(['--ci']).limits).toEqual([]);
    const only = parseBenchOptions(['--scenarios', 'limits']);
    expect(only.scenarios).toEqual([]);
    expect(only.limits.map((s) => s.id)).toEqual([
      'limits-none',
      'limits-slot',
      'limits-slot-busy',
      'limits-rate',
      'limits-rate-busy',
    ]);
    expect(parseBenchOptions(['--scenarios', 'dup10,limits']).scenarios.map((s) => s.id)).toEqual(['dup10']);
  });

  it('interleaves tenants A and B; A is one key when contended, spread over keys when not', () => {
    expect([0, 1, 2, 3].map((i) => limitMessage('slot-busy', i).group)).toEqual(['A', 'B', 'A', 'B']);
    expect(limitMessage('slot-busy', 1)).toEqual({ group: 'B', tenant: 'b', limited: false });
    expect(new Set([0, 2, 4, 198].map((i) => limitMessage('slot-busy', i).tenant))).toEqual(new Set(['a']));
    expect(new Set([0, 2, 4, 198].map((i) => limitMessage('slot', i).tenant)).size).toBe(4);
  });
});

/** An SQS client that accepts every batch and numbers its messages m1, m2, ... */
function fakeSqs() {
  let n = 0;
  return {
    send: async (command: { input: { Entries?: { Id: string }[] } }) => ({
      Successful: (command.input.Entries ?? []).map((e) => ({ Id: e.Id, MessageId: `m${++n}` })),
      Failed: [],
    }),
  };
}

describe('bench producer and re-sent messages', () => {
  const workload = planWorkload({ tag: 't', messages: 20, duplicates: 0, timing: 'after', kills: 0 });

  async function sent(resends: boolean) {
    const producer = new Producer({
      sqs: fakeSqs() as never,
      queueUrl: 'q',
      workload,
      backlog: Number.POSITIVE_INFINITY,
      resends,
    });
    await producer.run(new AbortController().signal);
    return producer;
  }

  it('counts a re-sent message (an id it never sent) as its key original when told workers re-send', async () => {
    const producer = await sent(true);
    expect(producer.sent).toBe(20);
    producer.finished('resent-1', 1000, 't-3');
    expect(producer.done).toBe(1);
    expect(producer.doneAt.get('t-3')).toBe(1000);
  });

  it('leaves an unknown id uncounted otherwise (a copy done before its send answer)', async () => {
    const producer = await sent(false);
    producer.finished('resent-1', 1000, 't-3');
    expect(producer.done).toBe(0);
  });
});

function limitRun(scenario: string, partial: Partial<RunResult>): RunResult {
  return {
    consumer: 'leased',
    scenario,
    repeat: 0,
    workers: 2,
    messages: 100,
    uniqueJobs: 100,
    startedAt: '',
    loadAverage1m: 0,
    wallMs: 1000,
    timedOut: false,
    jobsPerSecond: 100,
    latencyMs: [],
    requests: { 'DynamoDB.UpdateItem': 100, 'SQS.ReceiveMessage': 10 },
    capacity: {
      wru: 500,
      rru: 0,
      reportedWru: 500,
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
    groups: {
      A: { jobs: 50, done: 50, wallMs: 1000, jobsPerSecond: 50 },
      B: { jobs: 50, done: 50, wallMs: 1000, jobsPerSecond: 50 },
    },
    ...partial,
  };
}

describe('bench limits summary', () => {
  it('charges what a limit adds to the limited tenant jobs, against variant none of the same round', () => {
    const none = limitRun('limits-none', {});
    const slot = limitRun('limits-slot', {
      // 50 limited jobs, each +2 UpdateItems and +2 WRU, 10 bounces with one SQS request each.
      requests: { 'DynamoDB.UpdateItem': 200, 'SQS.ReceiveMessage': 10, 'SQS.ChangeMessageVisibility': 10 },
      capacity: { ...none.capacity, wru: 600 },
      stats: { LimitWait: 10 },
    });
    const [base, limited] = summarizeLimits([none, slot], ['limits-none', 'limits-slot'], ['leased']);
    expect(base?.addedPerLimitedJob).toBeUndefined();
    expect(limited?.addedPerLimitedJob).toEqual({ dynamodbRequests: 2, wru: 2, rru: 0, sqsRequests: 0.2 });
    expect(limited?.addedRequestsPerLimitedJob?.['DynamoDB.UpdateItem']).toBe(2);
    expect(limited?.waitsPerLimitedJob).toBe(0.2);
    expect(limited?.perJob.wru).toBe(6);
    const text = limitsText(
      [base, limited].filter((s) => s !== undefined),
      { messages: 100, workers: 2 },
    );
    expect(text).toContain('+2.00');
    expect(text).toContain('sqs:ChangeVis');
  });
});

describe('bench capacity of batch reads the emulator reports none for', () => {
  it('bills 0.5 RRU per key asked for, 1 when consistent', () => {
    expect(batchGetUnits({ RequestItems: { t: { Keys: [{}, {}, {}] } } })).toBe(1.5);
    expect(
      batchGetUnits({ RequestItems: { t: { Keys: [{}, {}], ConsistentRead: true }, u: { Keys: [{}] } } }),
    ).toBe(2.5);
  });
});
