/**
 * The load run (docs/scaling.md, "The load run"): the real pipeline (processBatch, JobProcessor, the
 * DynamoDB adapters) on the in-memory DynamoDB with DynamoDB's per-partition limit enforced (1,000 WRU
 * and 3,000 RRU a second per partition key value), an in-memory standard queue, a producer at a fixed
 * rate and several workers in this process, each its own processor and stores as a Lambda instance
 * is. Each second it prints what was sent and done, the busiest item's units and the requests DynamoDB
 * throttled, by item: where the model (model.ts) says a workload's first wall is, this shows it.
 *
 *   npm run bench:scale -- --load [--scenario plain|rate|lease] [--rate N] [--seconds N] [--workers N]
 */

import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import { z } from 'zod';
import { DynamoDbJobStore } from '../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../../shared/core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../../shared/core/adapters/dynamodb-rate-store.ts';
import { makeEnvelope } from '../../shared/core/contract/envelope.ts';
import { versionedPut } from '../../shared/core/decisions/optimistic.ts';
import type { AnyJobDefinition } from '../../shared/core/model/job-definition.ts';
import { JobRegistry } from '../../shared/core/model/registry.ts';
import { processBatch } from '../../shared/core/pipeline/batch.ts';
import { JobProcessor } from '../../shared/core/pipeline/processor.ts';
import { defineJob } from '../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../shared/testing/in-memory-queue.ts';
import { renderTable } from '../report.ts';
import { JOBS, LEASES, LEDGER, MeteredDb } from './metered-db.ts';

export const LOAD_SCENARIOS = ['plain', 'rate', 'lease'] as const;
export type LoadScenario = (typeof LOAD_SCENARIOS)[number];

export interface LoadOptions {
  readonly scenario: LoadScenario;
  /** Messages sent a second. */
  readonly rate: number;
  readonly seconds: number;
  /** Worker loops (each a Lambda instance: its own processor, rate store memory and batches of 10). */
  readonly workers: number;
  /** Each DynamoDB answer's delay, ms (requests of many records are in flight at once). @default 2 */
  readonly latencyMs?: number;
  /** The `rate` scenario's limit on its one key, per second. @default 1000 */
  readonly rateLimit?: number;
  /** Write units a second one partition key value serves (a test scales it down). @default 1000 */
  readonly partitionWriteUnits?: number;
  /** The job's own run time, ms (a timer: a call it waits on; the `lease` scenario holds the lease for it). @default 0 */
  readonly jobMs?: number;
}

/** One second of the run. */
export interface LoadSecond {
  readonly second: number;
  readonly sent: number;
  readonly done: number;
  /** The item that took the most write units this second, and how many. */
  readonly busiest: { readonly item: string; readonly wru: number };
  /** Requests DynamoDB refused for a partition's throughput this second, by partition. */
  readonly throttled: Readonly<Record<string, number>>;
  /** Records given back to the queue (retries, bounces) this second. */
  readonly retained: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function definitionOf(o: LoadOptions): AnyJobDefinition {
  const payload = z.object({ account: z.string() });
  const effects = async (account: string) => {
    if (o.jobMs) await sleep(o.jobMs);
    return {
      effects: [
        versionedPut({ tableName: LEDGER, key: { account }, seenVersion: undefined, item: { n: 1 } }),
      ],
    };
  };
  if (o.scenario === 'rate') {
    const limit = o.rateLimit ?? 1000;
    return defineJob({
      type: 'load.rate',
      payload,
      rateLimit: { limit, perSeconds: 1, key: () => 'hot' },
      run: async (_ctx, p) => effects(p.account),
    }) as AnyJobDefinition;
  }
  if (o.scenario === 'lease') {
    return defineJob({
      type: 'load.lease',
      payload,
      run: (ctx, p) => ctx.withLease('acct#1', () => effects(p.account)),
    }) as AnyJobDefinition;
  }
  return defineJob({
    type: 'load.plain',
    payload,
    run: async (_ctx, p) => effects(p.account),
  }) as AnyJobDefinition;
}

/** Runs the load and returns its seconds (also printed as they end when `say` is given). */
export async function loadRun(o: LoadOptions, say?: (line: string) => void): Promise<LoadSecond[]> {
  const db = new MeteredDb(Date.now, {
    latencyMs: o.latencyMs ?? 2,
    partitionLimits: { writeUnitsPerSecond: o.partitionWriteUnits ?? 1000 },
  });
  const queue = new InMemoryQueue({ visibilitySeconds: 30 });
  const definition = definitionOf(o);
  const registry = JobRegistry.of([definition]);
  const logger = new Logger({ serviceName: 'load', logLevel: 'SILENT' });
  let done = 0;
  let retained = 0;
  let sent = 0;
  let stop = false;
  const worker = async (id: number) => {
    const processor = new JobProcessor({
      store: new DynamoDbJobStore({ client: db, tableName: JOBS }),
      queue,
      registry,
      leases: new DynamoDbLeaseStore({ client: db, tableName: LEASES }),
      rates: new DynamoDbRateStore({ client: db, tableName: LEASES }),
      worker: `load-${id}`,
      logger,
    });
    while (!stop) {
      const records = queue.receive(10);
      if (records.length === 0) {
        await sleep(2);
        continue;
      }
      const { outcomes } = await processBatch(records, processor);
      // Answers that come at once are microtasks: yield, or the producer and the clock never run.
      await new Promise((resolve) => setImmediate(resolve));
      for (const [i, outcome] of outcomes.entries()) {
        if (outcome.disposition === 'delete') {
          done += 1;
          await queue.delete(records[i]?.receiptHandle ?? '');
        } else retained += 1;
      }
    }
  };
  const producer = async () => {
    const started = Date.now();
    while (!stop) {
      const due = Math.floor(((Date.now() - started) / 1000) * o.rate);
      for (; sent < due; sent++) {
        const key = `${o.scenario}-${sent}`;
        queue.send(
          JSON.stringify(
            makeEnvelope({ id: key, dedupKey: key, type: definition.type, payload: { account: `a${sent}` } }),
          ),
        );
      }
      await sleep(5);
    }
  };
  const seconds: LoadSecond[] = [];
  const loops = [producer(), ...Array.from({ length: o.workers }, (_, i) => worker(i))];
  let lastUnits = new Map<string, number>();
  let lastThrottles = new Map<string, number>();
  let last = { sent: 0, done: 0, retained: 0 };
  let at = Date.now();
  for (let s = 1; s <= o.seconds; s++) {
    await sleep(1000);
    // A starved event loop stretches a "second": every count is per second of the clock.
    const per = 1000 / Math.max(1, Date.now() - at);
    at = Date.now();
    const units = new Map([...db.books.byItem].map(([k, v]) => [k, v.wru]));
    let busiest = { item: '-', wru: 0 };
    for (const [k, wru] of units) {
      const d = wru - (lastUnits.get(k) ?? 0);
      if (d * per > busiest.wru) busiest = { item: k.replace('\u0000', ' '), wru: d * per };
    }
    const throttles = new Map(
      (db.partitions?.throttles() ?? []).map((t) => [
        `${t.table}${t.index ? `/${t.index}` : ''} ${t.partition}`,
        t.requests,
      ]),
    );
    const throttled: Record<string, number> = {};
    for (const [k, v] of throttles)
      if (v > (lastThrottles.get(k) ?? 0)) throttled[k] = v - (lastThrottles.get(k) ?? 0);
    const second: LoadSecond = {
      second: s,
      sent: (sent - last.sent) * per,
      done: (done - last.done) * per,
      busiest,
      throttled,
      retained: (retained - last.retained) * per,
    };
    seconds.push(second);
    say?.(
      `  s${s}: sent ${second.sent.toFixed(0)}/s, done ${second.done.toFixed(0)}/s, retained ${second.retained.toFixed(0)}/s, busiest ${busiest.item} ${busiest.wru.toFixed(0)} WRU/s, throttled ${
        Object.entries(throttled)
          .map(([k, v]) => `${k} ${v.toFixed(0)}/s`)
          .join(', ') || 'none'
      }`,
    );
    lastUnits = units;
    lastThrottles = throttles;
    last = { sent, done, retained };
  }
  stop = true;
  // Batches still in flight end within their retries; a run does not wait past 10 s for them.
  await Promise.race([Promise.all(loops), sleep(10_000)]);
  return seconds;
}

/** `npm run bench:scale -- --load ...`: one run, its seconds and a summary table. */
export async function runLoad(argv: readonly string[]): Promise<void> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      load: { type: 'boolean' },
      scenario: { type: 'string' },
      rate: { type: 'string' },
      seconds: { type: 'string' },
      workers: { type: 'string' },
      'rate-limit': { type: 'string' },
      'latency-ms': { type: 'string' },
      'job-ms': { type: 'string' },
    },
    strict: true,
  });
  const scenario = (values.scenario ?? 'rate') as LoadScenario;
  if (!LOAD_SCENARIOS.includes(scenario)) {
    throw new Error(
      `--scenario must be one of ${LOAD_SCENARIOS.join(', ')}, received ${JSON.stringify(scenario)}`,
    );
  }
  const int = (name: string, v: string | undefined, fallback: number, min = 1) => {
    const x = v === undefined ? fallback : Number(v);
    if (!Number.isInteger(x) || x < min) {
      throw new Error(`--${name} must be a whole number >= ${min}, received ${JSON.stringify(v)}`);
    }
    return x;
  };
  const o: LoadOptions = {
    scenario,
    rate: int('rate', values.rate, 600),
    seconds: int('seconds', values.seconds, 8),
    workers: int('workers', values.workers, 8),
    rateLimit: int('rate-limit', values['rate-limit'], 1000),
    latencyMs: int('latency-ms', values['latency-ms'], 2, 0),
    jobMs: int('job-ms', values['job-ms'], 0, 0),
  };
  process.stdout.write(
    `load run: ${JSON.stringify(o)} (in-memory DynamoDB, 1,000 WRU/s per partition key)\n`,
  );
  const seconds = await loadRun(o, (line) => process.stdout.write(`${line}\n`));
  // The first second fills the pipeline; the rest is the steady state.
  const steady = seconds.slice(1);
  const sum = (f: (s: LoadSecond) => number) =>
    steady.reduce((n, s) => n + f(s), 0) / Math.max(1, steady.length);
  const throttledBy = new Map<string, number>();
  for (const s of steady)
    for (const [k, v] of Object.entries(s.throttled)) throttledBy.set(k, (throttledBy.get(k) ?? 0) + v);
  process.stdout.write(
    `${renderTable(
      ['sent/s', 'done/s', 'retained/s', 'busiest item WRU/s (max)', 'throttled requests/s, by partition'],
      [
        [
          sum((s) => s.sent).toFixed(0),
          sum((s) => s.done).toFixed(0),
          sum((s) => s.retained).toFixed(0),
          Math.max(...steady.map((s) => s.busiest.wru)).toFixed(0),
          [...throttledBy]
            .map(([k, v]) => `${k}: ${(v / Math.max(1, steady.length)).toFixed(0)}`)
            .join('; ') || 'none',
        ],
      ],
      [true, true, true, true, false],
    )}\n`,
  );
}
