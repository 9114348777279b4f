/**
 * The latency-model scenarios (`aws*`) on the in-memory stores (`npm run bench -- --in-memory`): the
 * consumer's batch handler in this process, its DynamoDB calls served by the in-memory DynamoDB and each
 * held for its drawn AWS latency (latency-model.ts), so the round trips are the model's and nothing
 * else: on the emulator its own calls took 18-24 ms against 8-11 ms drawn and every consumer stayed at
 * 49-55 % of its floor. Here jobs per slot (messages per second of handler time, as summary.ts counts
 * them) can be held to the floor. The bare consumer and both leaseq paths; Powertools' persistence
 * layer sends low-level commands the in-memory DynamoDB does not serve, so it runs on the emulator only.
 * Unique jobs only: the floor is a unique job's round trips.
 */
import { loadavg } from 'node:os';
import { Logger } from '@aws-lambda-powertools/logger';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoDbJobStore } from '../../shared/core/adapters/dynamodb-job-store.ts';
import { makeEnvelope } from '../../shared/core/contract/envelope.ts';
import { JobRegistry } from '../../shared/core/model/registry.ts';
import { processBatch } from '../../shared/core/pipeline/batch.ts';
import { JobProcessor } from '../../shared/core/pipeline/processor.ts';
import { EffectTables } from '../../shared/jobs/effect-tables.ts';
import { InMemoryDynamoDb } from '../../shared/testing/in-memory-dynamodb/client.ts';
import { leaseqTables } from '../../shared/testing/in-memory-dynamodb/tables.ts';
import { InMemoryQueue } from '../../shared/testing/in-memory-queue.ts';
import { median, renderTable } from '../report.ts';
import {
  BENCH_JOB_TYPE,
  COUNTER_UPDATE,
  countersTable,
  countJob,
  fastCountJob,
  noEffectJobs,
} from './jobs.ts';
import {
  callLatency,
  designOf,
  draw,
  floorJobsPerSlot,
  type LatencyModel,
  type LatencyTally,
  latencyModel,
} from './latency-model.ts';
import type { BenchOptions } from './options.ts';
import type { JobShape, Scenario } from './scenarios.ts';

/** The consumers that run in memory. */
export const IN_MEMORY_CONSUMERS = ['bare', 'leased', 'fast'] as const;
export type InMemoryConsumer = (typeof IN_MEMORY_CONSUMERS)[number];

/** One in-memory run of a latency scenario. */
export interface InMemoryRun {
  readonly consumer: InMemoryConsumer;
  readonly scenario: string;
  readonly messages: number;
  /** Messages per second of handler time. */
  readonly jobsPerSlot: number;
  readonly floor: number;
  /** DynamoDB calls per message. */
  readonly callsPerJob: number;
  /** The in-memory answer's own time against the draws. */
  readonly tally: LatencyTally;
  /** How much later than drawn a held call ended, on average (timers on a loaded machine), ms. */
  readonly timerLateMsPerCall: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** lib-dynamodb's command names as the model names DynamoDB's operations. */
const OPERATION: Readonly<Record<string, string>> = {
  GetCommand: 'GetItem',
  PutCommand: 'PutItem',
  UpdateCommand: 'UpdateItem',
  DeleteCommand: 'DeleteItem',
  TransactWriteCommand: 'TransactWriteItems',
};

/** The in-memory DynamoDB, every call held until its drawn AWS latency has passed. */
class LatentDb extends InMemoryDynamoDb {
  readonly drawn: LatencyTally = { calls: 0, overDraw: 0, emulatorMs: 0, drawnMs: 0 };
  /** How much later than asked the timers that held the calls fired, ms summed (a loaded machine). */
  lateMs = 0;

  constructor(
    readonly model: LatencyModel,
    tables: ConstructorParameters<typeof InMemoryDynamoDb>[0]['tables'],
  ) {
    super({ tables });
  }

  // biome-ignore lint/suspicious/noExplicitAny: the document client's overloads of send
  override async send(command: any, options?: any): Promise<any> {
    const name = String(command?.constructor?.name ?? '');
    const p = callLatency(this.model, 'DynamoDB', OPERATION[name] ?? name, command?.input);
    if (!p) return super.send(command, options);
    const drawn = draw(p);
    const start = performance.now();
    try {
      return await super.send(command, options);
    } finally {
      const took = performance.now() - start;
      this.drawn.calls += 1;
      this.drawn.emulatorMs += took;
      this.drawn.drawnMs += drawn;
      if (took > drawn) this.drawn.overDraw += 1;
      else if (drawn - took >= 1) {
        await sleep(drawn - took);
        this.lateMs += performance.now() - start - drawn;
      }
    }
  }
}

/** The consumer's batch handler on `db` (the same job and effect as the emulator's runs). */
function handlerOf(
  consumer: InMemoryConsumer,
  shape: JobShape,
  db: LatentDb,
  queue: InMemoryQueue,
  counters: string,
) {
  const apply = (id: string) =>
    db.send(
      new UpdateCommand({
        TableName: counters,
        Key: { id },
        UpdateExpression: COUNTER_UPDATE.expression,
        ExpressionAttributeNames: { ...COUNTER_UPDATE.names },
        ExpressionAttributeValues: { ...COUNTER_UPDATE.values },
      }),
    );
  if (consumer === 'bare') {
    return async (records: ReturnType<InMemoryQueue['receive']>) => {
      await Promise.all(records.map((r) => apply((JSON.parse(r.body) as { dedupKey: string }).dedupKey)));
    };
  }
  const fast = consumer === 'fast';
  const processor = new JobProcessor({
    store: new DynamoDbJobStore({ client: db, tableName: 'jobs' }),
    queue,
    registry:
      shape === 'no-effect' ? noEffectJobs(apply, fast) : JobRegistry.of([fast ? fastCountJob : countJob]),
    tables: new EffectTables(db, { [countersTable.name]: counters }),
    worker: `in-memory-${consumer}`,
    logger: new Logger({ serviceName: 'bench', logLevel: 'SILENT' }),
  });
  return async (records: ReturnType<InMemoryQueue['receive']>) => {
    await processBatch(records, processor);
  };
}

/**
 * One run: `messages` unique jobs through `slots` worker loops, each taking batches of `batch` from an
 * in-memory queue (the event source's receive and delete are not the handler's time and are not drawn).
 */
export async function runInMemory(
  scenario: Scenario,
  consumer: InMemoryConsumer,
  options: { readonly messages: number; readonly slots: number; readonly batch?: number },
): Promise<InMemoryRun> {
  const model = latencyModel(scenario.latency ?? 'aws');
  const counters = 'counters';
  const db = new LatentDb(model, [
    ...leaseqTables({ jobs: 'jobs' }),
    { name: counters, partitionKey: { name: 'id', type: 'S' } },
  ]);
  const queue = new InMemoryQueue();
  for (let i = 0; i < options.messages; i++) {
    const key = `${scenario.id}-${consumer}-${i}`;
    queue.send(
      JSON.stringify(
        makeEnvelope({ id: key, dedupKey: key, type: BENCH_JOB_TYPE, payload: { sentAt: Date.now() } }),
      ),
    );
  }
  const batch = options.batch ?? 10;
  let handlerMs = 0;
  let handled = 0;
  const slot = async () => {
    const handle = handlerOf(consumer, scenario.shape ?? 'effect', db, queue, counters);
    for (;;) {
      const records = queue.receive(batch);
      if (records.length === 0) return;
      const start = performance.now();
      await handle(records);
      handlerMs += performance.now() - start;
      handled += records.length;
      for (const r of records) await queue.delete(r.receiptHandle);
    }
  };
  await Promise.all(Array.from({ length: options.slots }, slot));
  const design = designOf(consumer, scenario.shape ?? 'effect');
  return {
    consumer,
    scenario: scenario.id,
    messages: handled,
    jobsPerSlot: (handled * 1000) / Math.max(1, handlerMs),
    floor: floorJobsPerSlot(model, design, batch),
    callsPerJob: db.drawn.calls / Math.max(1, handled),
    tally: db.drawn,
    timerLateMsPerCall: db.lateMs / Math.max(1, db.drawn.calls),
  };
}

/** `npm run bench -- --in-memory`: every latency scenario asked for, per consumer, its rounds' medians. */
export async function inMemoryReport(options: BenchOptions, say: (line: string) => void): Promise<number> {
  const scenarios = options.scenarios.filter((s) => s.latency !== undefined);
  if (scenarios.length === 0) {
    say(
      '--in-memory runs the latency-model scenarios only (aws, aws-tx2x, aws-tx3x, aws-noeffect): none asked for',
    );
    return 2;
  }
  const consumers = IN_MEMORY_CONSUMERS.filter((c) => (options.consumers as readonly string[]).includes(c));
  const rows: string[][] = [];
  for (const scenario of scenarios) {
    for (const consumer of consumers) {
      const runs: InMemoryRun[] = [];
      for (let round = 0; round < options.repeats; round++) {
        runs.push(
          await runInMemory(scenario, consumer, { messages: options.messages, slots: options.workers }),
        );
      }
      const perSlot = median(runs.map((r) => r.jobsPerSlot));
      const floor = runs[0]?.floor ?? Number.NaN;
      const calls = runs.reduce((n, r) => n + r.tally.calls, 0);
      const over = runs.reduce((n, r) => n + r.tally.overDraw, 0);
      rows.push([
        scenario.id,
        consumer,
        perSlot.toFixed(0),
        floor.toFixed(0),
        `${((100 * perSlot) / floor).toFixed(0)} %`,
        (runs[0]?.callsPerJob ?? 0).toFixed(2),
        `${((100 * over) / Math.max(1, calls)).toFixed(0)} %`,
        median(runs.map((r) => r.tally.emulatorMs / Math.max(1, r.tally.calls))).toFixed(2),
        median(runs.map((r) => r.timerLateMsPerCall)).toFixed(2),
      ]);
      say(`${scenario.id} ${consumer}: ${perSlot.toFixed(0)} jobs/s per slot, floor ${floor.toFixed(0)}`);
    }
  }
  process.stdout.write(
    `\nLatency model on the in-memory stores (${options.repeats} rounds x ${options.messages} messages, ${options.workers} slots, batch 10; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')})\n${renderTable(
      [
        'scenario',
        'consumer',
        'jobs/s per slot',
        'floor',
        'of floor',
        'DDB calls/job',
        'calls over draw',
        'own ms/call',
        'timer late ms/call',
      ],
      rows,
      [false, false, true, true, true, true, true, true, true],
    )}\n`,
  );
  return 0;
}
