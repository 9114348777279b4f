import { loadavg } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DeleteTableCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { DeleteQueueCommand } from '@aws-sdk/client-sqs';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { AwsClients } from '../../shared/aws/clients.ts';
import { provisionLocal } from '../../shared/local/provision.ts';
import { queueStats, totalDepth } from '../../shared/ops/queue-stats.ts';
import type { CapacityTotals } from './capacity.ts';
import type { Death, Fleet } from './fleet.ts';
import { BENCH_JOB_TYPE, leasedJobs } from './jobs.ts';
import type { LatencyTally } from './latency-model.ts';
import { keyIndex, LIMITED_JOB_TYPE, limitMessage, type TenantGroup } from './limit-plan.ts';
import { Producer } from './producer.ts';
import type { ConsumerId, Scenario } from './scenarios.ts';
import { planWorkload } from './workload.ts';

/** What one run needs. */
export interface RunSpec {
  readonly consumer: ConsumerId;
  readonly scenario: Scenario;
  /** Round number (0-based); -1 for the warm-up. */
  readonly repeat: number;
  readonly workers: number;
  readonly messages: number;
  readonly kills: number;
  readonly timeoutSeconds: number;
  readonly runTimeoutSeconds: number;
  /** Prefix of every resource of this benchmark session (cleanup finds leftovers by it). */
  readonly session: string;
  readonly endpoint: string;
  readonly region: string;
  /** Uncounted clients: provisioning, the producer, the checks. */
  readonly control: AwsClients;
  /** The worker processes (kept across runs). */
  readonly fleet: Fleet;
  /** Folder of this run's kill markers (under the session's scratch folder). */
  readonly scratchDir: string;
}

/** Everything one run measured (the JSON keeps all of it). */
export interface RunResult {
  readonly consumer: ConsumerId;
  readonly scenario: string;
  readonly repeat: number;
  readonly workers: number;
  readonly messages: number;
  readonly uniqueJobs: number;
  readonly startedAt: string;
  /** The machine's 1-minute load average when the run started (other work on it shows here). */
  readonly loadAverage1m: number;
  /** First send to the last message done. */
  readonly wallMs: number;
  readonly timedOut: boolean;
  /** Messages (duplicates included) done per second. */
  readonly jobsPerSecond: number;
  /** Enqueue (first send of the job) to its first effect, over the jobs whose effect was stamped. */
  readonly latencyMs: readonly number[];
  /** Worker requests by `Service.Command`, summed over every worker process of the run. */
  readonly requests: Readonly<Record<string, number>>;
  readonly capacity: CapacityTotals;
  /** What the consumer decided, summed over its workers. */
  readonly stats: Readonly<Record<string, number>>;
  readonly effects: {
    /** Sum of the counters. */
    readonly applied: number;
    /** Effects beyond one per job (the counter above 1). */
    readonly doubles: number;
    /** Jobs whose counter row is missing. */
    readonly missing: number;
    readonly jobsWithDoubles: number;
  };
  readonly kills: { readonly planned: number; readonly happened: number };
  readonly deaths: readonly Death[];
  readonly workersStarted: number;
  readonly batchItemFailures: number;
  readonly batchErrors: number;
  readonly deadLetters: number;
  /** The batch handler's time, as Lambda would bill it: invocations, ms inside, ms billed (1 ms steps). */
  readonly lambda: { readonly invocations: number; readonly handlerMs: number; readonly billedMs: number };
  /** Under a latency model: the emulator's time against the draws, summed over the workers. */
  readonly latencyTally?: LatencyTally;
  /** Messages still in the queue when the run ended. */
  readonly leftInQueue: number;
  /** A limits run: each tenant group's jobs and jobs/s (its jobs over first send to its last done). */
  readonly groups?: Readonly<Partial<Record<TenantGroup, GroupResult>>>;
}

/** One tenant group of a limits run. */
export interface GroupResult {
  readonly jobs: number;
  readonly done: number;
  readonly wallMs: number;
  readonly jobsPerSecond: number;
}

function sum(states: readonly Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of states) for (const [k, v] of Object.entries(s)) out[k] = (out[k] ?? 0) + v;
  return out;
}

function sumCapacity(list: readonly CapacityTotals[]): CapacityTotals {
  const n = (f: (c: CapacityTotals) => number) => list.reduce((acc, c) => acc + f(c), 0);
  const byCommand: Record<string, { wru: number; rru: number }> = {};
  for (const c of list) {
    for (const [k, v] of Object.entries(c.byCommand)) {
      const row = byCommand[k] ?? { wru: 0, rru: 0 };
      row.wru += v.wru;
      row.rru += v.rru;
      byCommand[k] = row;
    }
  }
  return {
    wru: n((c) => c.wru),
    rru: n((c) => c.rru),
    reportedWru: n((c) => c.reportedWru),
    reportedRru: n((c) => c.reportedRru),
    computedWru: n((c) => c.computedWru),
    computedRru: n((c) => c.computedRru ?? 0),
    reportedRequests: n((c) => c.reportedRequests),
    computedRequests: n((c) => c.computedRequests),
    byCommand,
  };
}

const SHORT: Readonly<Record<ConsumerId, string>> = { bare: 'b', powertools: 'p', leased: 'l', fast: 'f' };

async function scanCounters(control: AwsClients, table: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let start: Record<string, unknown> | undefined;
  do {
    const page = await control.doc.send(
      new ScanCommand({
        TableName: table,
        ConsistentRead: true,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    for (const item of page.Items ?? []) out.set(String(item.id), Number(item.n ?? 0));
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
}

/** Each tenant group's throughput: its jobs over the time from the run's start to its last job done. */
function groupResults(
  variant: NonNullable<Scenario['limits']>,
  keys: readonly string[],
  producer: Producer,
  started: number,
): Partial<Record<TenantGroup, GroupResult>> {
  const out: Partial<Record<TenantGroup, GroupResult>> = {};
  for (const group of ['A', 'B'] as const) {
    const mine = keys.filter((key) => limitMessage(variant, keyIndex(key)).group === group);
    const done = mine.map((key) => producer.doneAt.get(key)).filter((at) => at !== undefined);
    const wallMs = Math.max(1, (done.length > 0 ? Math.max(...done) : Date.now()) - started);
    out[group] = {
      jobs: mine.length,
      done: done.length,
      wallMs,
      jobsPerSecond: (done.length / wallMs) * 1000,
    };
  }
  return out;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One run: fresh queues and tables, `workers` worker processes of one consumer, the scenario's
 * workload through the producer, then the counters checked and everything deleted again.
 */
export async function runOnce(spec: RunSpec, say: (line: string) => void): Promise<RunResult> {
  const { control, scenario } = spec;
  const tag = `${spec.session}-${scenario.id}-${SHORT[spec.consumer]}${spec.repeat < 0 ? 'w' : spec.repeat}`;
  const cleanups: (() => Promise<unknown>)[] = [];
  const t0 = Date.now();
  const phase = (name: string) => process.env.BENCH_TRACE && say(`${tag} ${name} +${Date.now() - t0} ms`);
  try {
    const provisioned = await provisionLocal({
      clients: control,
      prefix: tag,
      stackProps: { jobs: leasedJobs },
    });
    const o = provisioned.outputs;
    for (const url of [o.JobsQueueUrl, o.DlqUrl]) {
      cleanups.push(() => control.sqs.send(new DeleteQueueCommand({ QueueUrl: url })));
    }
    for (const table of provisioned.tables) {
      cleanups.push(() => control.ddb.send(new DeleteTableCommand({ TableName: table.name })));
    }
    const idempotencyTable = `${tag}-idempotency`;
    if (spec.consumer === 'powertools') {
      // Powertools' documented table: partition key `id` (string), on-demand, TTL on `expiration`.
      await control.ddb.send(
        new CreateTableCommand({
          TableName: idempotencyTable,
          BillingMode: 'PAY_PER_REQUEST',
          KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
          AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        }),
      );
      cleanups.push(() => control.ddb.send(new DeleteTableCommand({ TableName: idempotencyTable })));
      await waitUntilTableExists({ client: control.ddb, maxWaitTime: 60 }, { TableName: idempotencyTable });
      await control.ddb
        .send(
          new UpdateTimeToLiveCommand({
            TableName: idempotencyTable,
            TimeToLiveSpecification: { AttributeName: 'expiration', Enabled: true },
          }),
        )
        .catch(() => undefined); // TTL only tidies; an emulator without it changes nothing here
    }
    phase('provisioned');
    const countersTable = provisioned.appTables.counters ?? '';
    const queueArn = provisioned.queues.find((q) => q.url === o.JobsQueueUrl)?.arn ?? '';

    const workload = planWorkload({
      tag,
      messages: spec.messages,
      duplicates: scenario.duplicates,
      timing: scenario.timing,
      kills: scenario.kill ? spec.kills : 0,
    });
    const variant = scenario.limits;
    const producer = new Producer({
      sqs: control.sqs,
      queueUrl: o.JobsQueueUrl,
      workload,
      // A limits run sends every message at once: tenant A's burst sits in the queue among tenant B's.
      backlog: variant ? Number.POSITIVE_INFINITY : 20 * (spec.workers + 1),
      // A limit's bounce re-sends a message from its fifth receive: the new message's id is not ours.
      resends: variant !== undefined,
      ...(variant
        ? {
            describe: (key: string) => {
              const m = limitMessage(variant, keyIndex(key));
              return { type: m.limited ? LIMITED_JOB_TYPE : BENCH_JOB_TYPE, fields: { tenant: m.tenant } };
            },
          }
        : {}),
    });
    const run = await spec.fleet.begin(
      {
        run: tag,
        consumer: spec.consumer,
        endpoint: spec.endpoint,
        region: spec.region,
        names: {
          queueUrl: o.JobsQueueUrl,
          dlqUrl: o.DlqUrl,
          jobsTable: o.JobsTableName,
          leasesTable: o.LeasesTableName,
          countersTable,
          idempotencyTable,
        },
        queueArn,
        timeoutMs: spec.timeoutSeconds * 1000,
        visibilitySeconds: spec.timeoutSeconds,
        killKeys: workload.killKeys,
        markerDir: join(spec.scratchDir, tag, 'kills'),
        ...(scenario.latency ? { latency: scenario.latency } : {}),
        shape: scenario.shape ?? 'effect',
        ...(variant ? { limits: variant } : {}),
      },
      spec.workers,
      (ids, at, keys) => {
        for (const [i, id] of ids.entries()) producer.finished(id, at, keys?.[i]);
      },
    );
    let ended = false;
    cleanups.unshift(async () => {
      if (!ended) await spec.fleet.end(run);
    });
    phase('fleet started');

    const started = Date.now();
    const loadAtStart = loadavg()[0];
    const deadline = started + spec.runTimeoutSeconds * 1000;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), spec.runTimeoutSeconds * 1000);
    const watch = setInterval(() => {
      if (run.failure) abort.abort();
    }, 200);
    try {
      await producer.run(abort.signal);
      while (!producer.complete && Date.now() < deadline && !run.failure) await sleep(50);
    } finally {
      clearTimeout(timer);
      clearInterval(watch);
    }
    phase('all done');
    let timedOut = !producer.complete;
    const doneAt = producer.complete ? producer.lastDoneAt : Date.now();
    // Straggling copies (a delete that failed, a copy hidden by leaseq) must be gone before the count.
    let depth = totalDepth(await queueStats(control.sqs, o.JobsQueueUrl));
    while (depth > 0 && Date.now() < deadline + 30_000 && !run.failure) {
      await sleep(500);
      depth = totalDepth(await queueStats(control.sqs, o.JobsQueueUrl));
    }
    if (depth > 0) timedOut = true;
    phase('drained');
    await spec.fleet.end(run);
    ended = true;
    phase('fleet stopped');
    if (run.failure) throw new Error(run.failure);

    const counters = await scanCounters(control, countersTable);
    let applied = 0;
    let doubles = 0;
    let missing = 0;
    let jobsWithDoubles = 0;
    for (const key of workload.keys) {
      const n = counters.get(key) ?? 0;
      applied += n;
      if (n === 0) missing += 1;
      if (n > 1) {
        doubles += n - 1;
        jobsWithDoubles += 1;
      }
    }
    const firstEffect = new Map<string, number>();
    for (const [key, at] of run.effects) {
      const seen = firstEffect.get(key);
      if (seen === undefined || at < seen) firstEffect.set(key, at);
    }
    const latencyMs: number[] = [];
    for (const [key, at] of firstEffect) {
      const sent = producer.firstSent.get(key);
      if (sent !== undefined) latencyMs.push(at - sent);
    }
    const states = run.states;
    const wallMs = Math.max(1, doneAt - started);
    phase('counted');
    const deadLetters = totalDepth(await queueStats(control.sqs, o.DlqUrl));
    return {
      consumer: spec.consumer,
      scenario: scenario.id,
      repeat: spec.repeat,
      workers: spec.workers,
      messages: workload.messages,
      uniqueJobs: workload.keys.length,
      startedAt: new Date(started).toISOString(),
      loadAverage1m: Number((loadAtStart ?? 0).toFixed(2)),
      wallMs,
      timedOut,
      jobsPerSecond: (producer.done / wallMs) * 1000,
      latencyMs,
      requests: sum(states.map((s) => s.requests)),
      capacity: sumCapacity(states.map((s) => s.capacity)),
      stats: sum(states.map((s) => s.stats)),
      effects: { applied, doubles, missing, jobsWithDoubles },
      kills: { planned: workload.killKeys.length, happened: run.deaths.filter((d) => d.planned).length },
      deaths: run.deaths,
      workersStarted: run.participants.size + run.deaths.length,
      batchItemFailures: states.reduce((n, s) => n + s.failed, 0),
      batchErrors: states.reduce((n, s) => n + s.batchErrors, 0),
      deadLetters,
      lambda: {
        invocations: states.reduce((n, s) => n + s.batches, 0),
        handlerMs: states.reduce((n, s) => n + s.handlerMs, 0),
        billedMs: states.reduce((n, s) => n + s.billedMs, 0),
      },
      ...(scenario.latency
        ? {
            latencyTally: states.reduce<LatencyTally>(
              (t, s) => ({
                calls: t.calls + (s.latency?.calls ?? 0),
                overDraw: t.overDraw + (s.latency?.overDraw ?? 0),
                emulatorMs: t.emulatorMs + (s.latency?.emulatorMs ?? 0),
                drawnMs: t.drawnMs + (s.latency?.drawnMs ?? 0),
              }),
              { calls: 0, overDraw: 0, emulatorMs: 0, drawnMs: 0 },
            ),
          }
        : {}),
      leftInQueue: depth,
      ...(variant ? { groups: groupResults(variant, workload.keys, producer, started) } : {}),
    };
  } finally {
    phase('cleanup');
    for (const cleanup of cleanups) {
      await cleanup().catch((error: unknown) =>
        say(`cleanup of ${tag}: ${error instanceof Error ? error.message : String(error)}`),
      );
    }
    phase('cleaned up');
  }
}
