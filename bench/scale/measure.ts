/**
 * The capacity model's measured pass: each job kind runs through the real processor and adapters
 * (DynamoDbJobStore, DynamoDbLeaseStore, DynamoDbRateStore) on the in-memory DynamoDB, one job at a time,
 * and every request's units (the client's own tally: the sizes DynamoDB bills) are put down to the item
 * they touched. Nothing here is a typed-in figure: the model (model.ts) reads only what this returns.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { z } from 'zod';
import { DynamoDbJobStore } from '../../shared/core/adapters/dynamodb-job-store.ts';
import { DynamoDbLeaseStore } from '../../shared/core/adapters/dynamodb-lease-store.ts';
import { DynamoDbRateStore } from '../../shared/core/adapters/dynamodb-rate-store.ts';
import { makeEnvelope } from '../../shared/core/contract/envelope.ts';
import type { JobQueue } from '../../shared/core/contract/job-queue.ts';
import { versionedPut } from '../../shared/core/decisions/optimistic.ts';
import type { AnyJobDefinition } from '../../shared/core/model/job-definition.ts';
import { JobRegistry } from '../../shared/core/model/registry.ts';
import { JobProcessor } from '../../shared/core/pipeline/processor.ts';
import { defineJob } from '../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../shared/testing/in-memory-queue.ts';

import { Books, JOBS, LEASES, LEDGER, MeteredDb, tallyOf } from './metered-db.ts';
/** What kind of item a request touched: where its partition key puts it. */
export type ItemRole = 'job' | 'problems' | 'rate' | 'slot' | 'named' | 'app';

/** One role's share of a job: per job, over the pass. */
export interface RoleFigures {
  /** Requests that touched an item of the role (a transaction counts for each role it touched). */
  readonly requests: number;
  readonly wru: number;
  readonly rru: number;
  /** The busiest item's share of the role's units (1: every job of the pass hit one item). */
  readonly busiestShare: number;
  /** Distinct items of the role the pass touched. */
  readonly items: number;
}

/** One job kind's measured figures, per job. */
export interface KindFigures {
  readonly kind: JobKind;
  readonly jobs: number;
  /** DynamoDB requests per job (a transaction is one, whatever it touches). */
  readonly requests: number;
  /** DynamoDB by item role (the `problems` index is its own role: the writes it is billed for). */
  readonly roles: Readonly<Partial<Record<ItemRole, RoleFigures>>>;
  /**
   * The client's own tally per job, by table (`jobs`, `leases`, `ledger`): what the books above must add
   * up to (a check that no request's units were lost or put down twice).
   */
  readonly tally: Readonly<
    Record<string, { readonly requests: number; readonly wru: number; readonly rru: number }>
  >;
  /** Calls of the queue port per job (change visibility, re-send, dead letter; deletes are the ESM's). */
  readonly queueCalls: number;
  /** Deliveries per job (receives of its message: retries and bounces come back). */
  readonly deliveries: number;
}

/** The job kinds the pass measures. */
export const JOB_KINDS = ['leased', 'fast', 'duplicate', 'problem', 'rate', 'slot', 'named'] as const;
export type JobKind = (typeof JOB_KINDS)[number];

/** The rate-limited kind, measured take by take while one key's log fills. */
export interface RateSeries {
  readonly limit: number;
  readonly perSeconds: number;
  /** WRU on rate items of take i (i grants already in the window before it). */
  readonly wruByTake: readonly number[];
  /** The busiest rate item's share of the rate units over the series. */
  readonly busiestShare: number;
}

/** Everything the model needs, from one measured pass. */
export interface Figures {
  readonly kinds: Readonly<Record<JobKind, KindFigures>>;
  readonly rate: RateSeries;
  /** The concurrency limit the `slot` kind ran under (its slots: separate items). */
  readonly slotLimit: number;
}

export interface MeasureOptions {
  /** Jobs per kind (the rate series takes `rateLimit` jobs). @default 40 */
  readonly jobs?: number;
  /** The rate limit the series is measured at, per second on one key. @default 1000 */
  readonly rateLimit?: number;
  /** The type-wide concurrency limit of the `slot` kind. @default 100 */
  readonly slotLimit?: number;
  /** The window of the rate series' limit, seconds (the rate workload's: a limit per second). @default 1 */
  readonly ratePerSeconds?: number;
}

/** One kind's world: the processor as the worker builds it, on a metered in-memory DynamoDB. */
function world(definition: AnyJobDefinition) {
  let skipped = 0;
  const now = () => Date.now() + skipped;
  const db = new MeteredDb(now);
  const queue = new InMemoryQueue({ now });
  let calls = 0;
  const port: JobQueue = {
    changeVisibility: async (receipt, seconds) => {
      calls += 1;
      await queue.changeVisibility(receipt, seconds);
    },
    delete: (receipt) => queue.delete(receipt),
    resend: async (body, options) => {
      calls += 1;
      await queue.resend(body, options);
    },
    sendToDeadLetter: async (body, reason, groupId) => {
      calls += 1;
      await queue.sendToDeadLetter(body, reason, groupId);
    },
  };
  const processor = new JobProcessor({
    store: new DynamoDbJobStore({ client: db, tableName: JOBS }),
    queue: port,
    registry: JobRegistry.of([definition]),
    leases: new DynamoDbLeaseStore({ client: db, tableName: LEASES }),
    rates: new DynamoDbRateStore({ client: db, tableName: LEASES }),
    worker: 'scale',
    logger: new Logger({ serviceName: 'scale', logLevel: 'SILENT' }),
    now,
  });
  let deliveries = 0;
  /** Sends and runs `keys` to the end, one job at a time, skipping retry delays. */
  const run = async (keys: readonly string[], payload: (i: number) => unknown, type: string) => {
    for (const [i, key] of keys.entries()) {
      queue.send(
        JSON.stringify(
          makeEnvelope({ id: `${key}-${i}-${skipped}`, dedupKey: key, type, payload: payload(i) }),
        ),
      );
      for (;;) {
        let [record] = queue.receive(1);
        if (!record) {
          const at = queue.nextVisibleAt();
          if (at === undefined) break;
          skipped += at - now() + 1;
          [record] = queue.receive(1);
          if (!record) break;
        }
        deliveries += 1;
        const outcome = await processor.process(record);
        if (outcome.disposition === 'delete') await queue.delete(record.receiptHandle);
      }
    }
  };
  return {
    db,
    run,
    counts: () => ({ calls, deliveries }),
    reset: () => {
      db.books = new Books();
      db.sent = 0;
      db.resetTally();
      calls = 0;
      deliveries = 0;
    },
  };
}

const credit = z.object({ account: z.string() });
/** The benchmark's job: one versioned write to the ledger, committed with the completion. */
function creditRun() {
  return async (_ctx: unknown, p: { account: string }) => ({
    effects: [
      versionedPut({
        tableName: LEDGER,
        key: { account: p.account },
        seenVersion: undefined,
        item: { n: 1 },
      }),
    ],
  });
}

async function measureKind(kind: JobKind, jobs: number, slotLimit: number): Promise<KindFigures> {
  const type = `scale.${kind}`;
  let failedOnce = new Set<string>();
  const definition = defineJob({
    type,
    payload: credit,
    ...(kind === 'fast' ? { fastPath: true } : {}),
    ...(kind === 'slot' ? { concurrency: { limit: slotLimit } } : {}),
    async run(ctx, p) {
      if (kind === 'problem' && !failedOnce.has(p.account)) {
        failedOnce.add(p.account);
        throw new Error('first attempt fails');
      }
      if (kind === 'named') return ctx.withLease('acct#1', () => creditRun()(ctx, p));
      return creditRun()(ctx, p);
    },
  });
  const w = world(definition as AnyJobDefinition);
  const keys = Array.from({ length: jobs }, (_, i) => `${kind}-${i}`);
  const payload = (i: number) => ({ account: `a${i}` });
  if (kind === 'duplicate') {
    await w.run(keys, payload, type);
    w.reset();
  }
  failedOnce = new Set();
  await w.run(keys, payload, type);
  const { calls, deliveries } = w.counts();
  return {
    kind,
    jobs,
    requests: w.db.sent / jobs,
    tally: tallyOf(w.db, jobs),
    roles: w.db.books.roles(jobs),
    queueCalls: calls / jobs,
    deliveries: deliveries / jobs,
  };
}

/** Takes of one key under `limit` per `perSeconds`, one job each, while the window fills. */
async function measureRate(
  limit: number,
  perSeconds: number,
): Promise<{ series: RateSeries; figures: KindFigures }> {
  const type = 'scale.rate';
  const definition = defineJob({
    type,
    payload: credit,
    rateLimit: { limit, perSeconds, key: () => 'hot' },
    run: creditRun(),
  });
  const w = world(definition as AnyJobDefinition);
  const wruByTake: number[] = [];
  const rateUnits = () =>
    [...w.db.books.byItem.values()].filter((r) => r.role === 'rate').reduce((n, r) => n + r.wru, 0);
  // The series runs on a clock of its own: the window's takes come as fast as a key at its limit asks
  // for them (`limit` spread over half the window), however long this machine takes to run them; the
  // rate store reads Date.now itself, so the clock is Date.now's for the series' length.
  const real = Date.now;
  const start = real();
  let virtual = start;
  Date.now = () => Math.floor(virtual);
  try {
    for (let i = 0; i < limit; i++) {
      const before = rateUnits();
      await w.run([`rate-${i}`], () => ({ account: `a${i}` }), type);
      wruByTake.push(rateUnits() - before);
      virtual += (perSeconds * 1000) / (2 * limit);
    }
  } finally {
    Date.now = real;
  }
  const roles = w.db.books.roles(limit);
  const { calls, deliveries } = w.counts();
  return {
    series: { limit, perSeconds, wruByTake, busiestShare: roles.rate?.busiestShare ?? 0 },
    figures: {
      kind: 'rate',
      jobs: limit,
      requests: w.db.sent / limit,
      tally: tallyOf(w.db, limit),
      roles,
      queueCalls: calls / limit,
      deliveries: deliveries / limit,
    },
  };
}

/** The measured pass: every job kind, and the rate series. A few seconds of CPU. */
export async function measure(options: MeasureOptions = {}): Promise<Figures> {
  const jobs = options.jobs ?? 40;
  const slotLimit = options.slotLimit ?? 100;
  const kinds = {} as Record<JobKind, KindFigures>;
  for (const kind of JOB_KINDS) {
    if (kind !== 'rate') kinds[kind] = await measureKind(kind, jobs, slotLimit);
  }
  const { series, figures } = await measureRate(options.rateLimit ?? 1000, options.ratePerSeconds ?? 1);
  kinds.rate = figures;
  return { kinds, rate: series, slotLimit };
}
