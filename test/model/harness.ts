import type { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { vi } from 'vitest';
import { DEFAULTS } from '../../shared/core/contract/defaults.ts';
import { makeEnvelope } from '../../shared/core/contract/envelope.ts';
import { HISTORY_MAX } from '../../shared/core/contract/job-history.ts';
import type { Checkpoint, JobItem } from '../../shared/core/contract/job-item.ts';
import type { DeadLetterReason, JobQueue, ResendOptions } from '../../shared/core/contract/job-queue.ts';
import type {
  CancelRequest,
  CancelResult,
  ClaimRequest,
  ClaimResult,
  Effect,
  FastCommitRequest,
  FastCommitResult,
  FencedWriteResult,
  JobLease,
  JobStore,
  RedriveBy,
  StoreCallOptions,
} from '../../shared/core/contract/job-store.ts';
import type {
  AcquireResult,
  LeaseItem,
  LeaseStore,
  NamedLease,
} from '../../shared/core/contract/lease-store.ts';
import type { RateStore, RateTake } from '../../shared/core/contract/rate-store.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { visibilityForLease } from '../../shared/core/decisions/lease-timing.ts';
import { versionedPut } from '../../shared/core/decisions/optimistic.ts';
import { payloadHash } from '../../shared/core/decisions/payload-hash.ts';
import type { EffectTable } from '../../shared/core/model/effect-table.ts';
import type { JobContext } from '../../shared/core/model/job-context.ts';
import { JobRegistry } from '../../shared/core/model/registry.ts';
import type { PayloadSchema } from '../../shared/core/model/standard-schema.ts';
import { MetricName } from '../../shared/core/observe/metric-names.ts';
import { InMemoryMetrics } from '../../shared/core/observe/metrics.ts';
import { processBatch } from '../../shared/core/pipeline/batch.ts';
import { CompletedCache } from '../../shared/core/pipeline/completed-cache.ts';
import { JobProcessor, type RecordOutcome } from '../../shared/core/pipeline/processor.ts';
import { describe as describeError } from '../../shared/error-text.ts';
import {
  LeaseBusyError,
  LeaseLostError,
  PermanentJobError,
  StoreRefusedError,
  StoreUnavailableError,
  TransientJobError,
} from '../../shared/errors.ts';
import { defineJob } from '../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../shared/testing/in-memory-queue.ts';
import { fifoGroup, fifoPick, fifoRecord } from './fifo.ts';
import { Meet, type MeetHost } from './meet.ts';
import { LEDGER_TABLE, ModelDb } from './model-db.ts';
import { modelJobStore } from './operator-sqs.ts';
import { editable, refusable } from './operators.ts';
import {
  ACCOUNTS,
  type CrashSpec,
  type FaultSpec,
  type JobSpec,
  kindsOf,
  type MeetKind,
  meetKindsOf,
  type OpSpec,
  QUEUE_OPS,
  type ReviewKind,
  type Scenario,
  STORE_OPS,
} from './scenario.ts';

/*
 * The interleaving model's harness: 2-3 JobProcessors poll one simulated SQS queue (InMemoryQueue) and
 * share the shipped DynamoDbJobStore on one InMemoryDynamoDb (model-db.ts), whose ledger table takes the
 * jobs' effects, under a schedule of duplicate
 * sends, store/queue faults (outages, lost answers, slow calls) and process kills.
 *
 * Time. The protocol is driven by timers (leases, heartbeats, visibility timeouts, backoff, slow calls),
 * so the model runs on a virtual clock: vi.useFakeTimers fakes setTimeout and Date, and `drive` jumps
 * from one timer to the next (vi.advanceTimersToNextTimer, synchronous) and then lets every promise
 * continuation run to quiescence (one real setImmediate: the microtask queue drains before it fires).
 * A run of many virtual minutes costs milliseconds. (vi.advanceTimersByTimeAsync yields a real
 * setTimeout per timer, ~1 ms each, far too slow for thousands of schedules.)
 *
 * Interleavings. Port calls cost no virtual time, so several workers act at the same virtual instant;
 * their order at every await is shuffled by the seeded jitter in `Ports.call` (0-3 extra microtask yields
 * before the call and after its answer) and in the jobs' read-modify-write of the ledger, on top of the
 * random receive order and poll jitter. That is why the model does not use fc.scheduler: the awaits to
 * be reordered are the library's own, and the seeded jitter reorders them without wrapping them all,
 * while the virtual clock keeps lease expiry, visibility and backoff real.
 *
 * Crashes. A worker dies at its n-th port call (store or queue), before the call is sent or after the
 * store applied it. From then on none of its calls is made or answered: every promise it awaits hangs, so
 * its heartbeat stops at the next renewal, its job never commits and its message is never deleted, as
 * when a process is killed. Its lease must expire and its message come back to another worker.
 *
 * Fast path. Every job kind but `steps` has a twin defined with `fastPath: true` (`model.fast.<kind>`):
 * on its first receive it runs unclaimed and commits its credit with the completion in one write
 * (`claimAndComplete`), which the faults reach like any other call; its credit is read when the job
 * runs, so racing copies and neighbours conflict optimistically. AuditStore checks the store's answers
 * against the effects it applied (which lists, by identity), so a refused commit that wrote shows.
 */

/** Virtual start of every run (fixed, so runs replay). */
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
/**
 * Virtual time a run may take before what is left counts as stuck: generous, since each failed delete
 * of a Lambda batch hides its message for 6 x the timeout (up to 6 min) before it is dropped again.
 */
export const BUDGET_MS = 6 * 3_600_000;
/** Timer firings after which a run counts as livelocked. */
const MAX_TIMERS = 200_000;
const TRACE_LIMIT = 20_000;
/** LEASEQ_DEADLINE_MARGIN_MS's default. */
const DEADLINE_MARGIN_MS = DEFAULTS.deadlineMarginMs;
const realSetImmediate = globalThis.setImmediate;

/** What one run found, and what it did. */
export interface RunReport {
  readonly violations: readonly string[];
  readonly stats: RunStats;
  /** The run's trace, formatted (only when asked, or when there are violations). */
  readonly trace?: string;
}

export interface RunStats {
  virtualMs: number;
  timers: number;
  outages: number;
  lostAnswers: number;
  slowCalls: number;
  stalledCalls: number;
  crashes: number;
  timeouts: number;
  restarts: number;
  duplicateSends: number;
  takeovers: number;
  ownMessageEarly: number;
  optimisticConflicts: number;
  leaseLostExcused: number;
  completed: number;
  dead: number;
  letters: number;
  extraLetters: number;
  /** Fast-path commits (`claimAndComplete`) the store answered: ok, refused, effect conflict. */
  fastCommits: number;
  fastRefused: number;
  fastConflicts: number;
  /** Fast commits whose answer was lost or abandoned (the processor then reads the item). */
  fastUnknown: number;
  /** Fast attempts that failed and were recorded under a lease (metric FastPathFallback). */
  fastFallbacks: number;
  /** Injected faults (outages, lost answers, slow calls) that hit a fast commit. */
  fastFaults: number;
  /** Job-item reads by workers: read-first's before fast runs (Scenario.readFirst) and settling reads. */
  reads: number;
  /** The most receives of one job's messages in the run. */
  maxReceives: number;
  /** Named leases taken (acquires that applied). */
  namedLeases: number;
  /** Letters the DLQ refused for their content. */
  refusedLetters: number;
  /** Commits the store refused for a DynamoDB limit (ValidationException). */
  limitRefusals: number;
  /** Runs that blocked the event loop past their lease. */
  blockedRuns: number;
  /** History events in the jobs' final items: dead keys reset by a fresh send, lost leases, dropped copies. */
  resets: number;
  leaseLostEvents: number;
  droppedCopies: number;
  /** Issue 21: bounces (a limit's wait), runs of limited types that committed, the most at once per scope. */
  bounces: number;
  limitedRuns: number;
  maxOverlap: number;
  /** Cancels acknowledged, jobs ending CANCELLED, rate permits granted. */
  cancels: number;
  cancelled: number;
  permits: number;
}

/** Every figure of {@link RunStats} at 0. */
export function emptyStats(): RunStats {
  return {
    virtualMs: 0,
    timers: 0,
    outages: 0,
    lostAnswers: 0,
    slowCalls: 0,
    stalledCalls: 0,
    crashes: 0,
    timeouts: 0,
    restarts: 0,
    duplicateSends: 0,
    takeovers: 0,
    ownMessageEarly: 0,
    optimisticConflicts: 0,
    leaseLostExcused: 0,
    completed: 0,
    dead: 0,
    letters: 0,
    extraLetters: 0,
    fastCommits: 0,
    fastRefused: 0,
    fastConflicts: 0,
    fastUnknown: 0,
    fastFallbacks: 0,
    fastFaults: 0,
    reads: 0,
    maxReceives: 0,
    namedLeases: 0,
    refusedLetters: 0,
    limitRefusals: 0,
    blockedRuns: 0,
    resets: 0,
    leaseLostEvents: 0,
    droppedCopies: 0,
    bounces: 0,
    limitedRuns: 0,
    maxOverlap: 0,
    cancels: 0,
    cancelled: 0,
    permits: 0,
  };
}

/** Runs one scenario on a fresh world under fake timers; never leaves fake timers installed. */
export interface RunOptions {
  /** Return the trace even when no invariant is violated. */
  readonly trace?: boolean;
  /**
   * What the workers see instead of the shared store (the model's own self-test breaks it on purpose);
   * `db` reads and deletes items outside any request.
   */
  readonly wrapStore?: (store: JobStore, db: ModelDb) => JobStore;
  /** What the workers see instead of the shared queue (a self-test breaks it on purpose). */
  readonly wrapQueue?: (queue: InMemoryQueue) => JobQueue;
  /** What the workers see instead of the shared named-lease store (a self-test breaks it on purpose). */
  readonly wrapLeases?: (leases: LeaseStore) => LeaseStore;
  /** What the workers see instead of the shared rate store (a self-test breaks it on purpose). */
  readonly wrapRates?: (rates: RateStore) => RateStore;
}

export async function runScenario(scenario: Scenario, options: RunOptions = {}): Promise<RunReport> {
  vi.useFakeTimers({
    now: T0,
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
  });
  // A rejection nobody handles ends a Node worker: the run records it as a violation (vitest's own
  // listeners are set aside meanwhile, so it is reported once, with the schedule that caused it).
  const saved = process.listeners('unhandledRejection');
  const rejections: string[] = [];
  const onRejection = (reason: unknown) => {
    rejections.push(`unhandled rejection (a Node worker would exit): ${describeError(reason)}`);
  };
  process.removeAllListeners('unhandledRejection');
  process.on('unhandledRejection', onRejection);
  try {
    const world = new World(scenario, options);
    world.start();
    await world.drive();
    await flush();
    const violations = [...(await world.check()), ...rejections];
    return {
      violations,
      stats: world.stats,
      ...(options.trace || violations.length > 0 ? { trace: world.formatTrace() } : {}),
    };
  } finally {
    vi.clearAllTimers();
    vi.useRealTimers();
    process.removeListener('unhandledRejection', onRejection);
    for (const listener of saved) process.on('unhandledRejection', listener);
  }
}

/** A small seeded PRNG (mulberry32): the run's every random choice comes from it. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const hang = (): Promise<never> => new Promise<never>(() => {});
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const flush = (): Promise<void> => new Promise((resolve) => realSetImmediate(resolve));

/** Bounces of one job after which it counts as starved (a limit that never lets it run). */
const BOUNCE_BOUND = 300;

/** One handler run of a limited type: its start, and its last commit the store accepted. */
interface ModelRun {
  readonly dedupKey: string;
  readonly worker: string;
  readonly tenant: number;
  readonly start: number;
  readonly startAt: number;
  commit?: number;
  commitAt?: number;
}

/** The shared queue: every message sent (a re-send by a bounce too) is known by its job. */
class ModelQueue extends InMemoryQueue {
  readonly #world: World;
  constructor(world: World) {
    super({ refuseInvalidContent: true });
    this.#world = world;
  }
  override send(
    body: string,
    options: { delaySeconds?: number; groupId?: string; attributes?: SQSRecord['messageAttributes'] } = {},
  ): string {
    const id = super.send(body, options);
    try {
      const key = (JSON.parse(body) as { dedupKey?: unknown }).dedupKey;
      if (typeof key === 'string') this.#world.keyOfMessage.set(id, key);
    } catch {
      // Not an envelope: no job.
    }
    return id;
  }
  override async sendToDeadLetter(body: string, reason: DeadLetterReason, groupId?: string): Promise<void> {
    const startedAt = Date.now();
    const before = new Set(this.deadLetters);
    try {
      await super.sendToDeadLetter(body, reason, groupId);
    } finally {
      // When the send was asked for: a slow send lands after what happened meanwhile (a cancel's ack).
      for (const letter of this.deadLetters)
        if (!before.has(letter)) this.#world.letterSentAt.set(letter, startedAt);
      // Landed (its answer lost or not): issue 31's books know the life it was sent in. Two sends under
      // way at once (slow ones) may land in either order: the letter is the one the books do not know.
      this.#world.meet.letteredAny(this.deadLetters);
    }
  }
}

type TraceEntry = readonly [at: number, level: string, message: string, extra: Record<string, unknown>];

class World implements MeetHost {
  readonly scenario: Scenario;
  readonly rng: () => number;
  /**
   * The schedule's DynamoDB and the adapters on it: the job store, the named leases of the jobs that take
   * one (`ctx.withLease`, fenced in their commits), the rate permits of the `model.limited.*` types (steer
   * kind `rate`), the ledger the jobs credit through their effect tables.
   */
  readonly model: ModelDb;
  readonly applier: CommittedEffects;
  readonly store: JobStore;
  readonly leases: LeaseStore;
  readonly rates: RateStore;
  // The DLQ refuses what SQS refuses (text outside its character set, oversized letters).
  readonly queue = new ModelQueue(this);
  readonly metrics = new InMemoryMetrics();
  readonly registry: JobRegistry;
  readonly logger: Logger;
  readonly stats: RunStats = emptyStats();

  readonly violations: string[] = [];
  /** `worker dedupKey` pairs for which one of that worker's calls about that job failed or was slow. */
  readonly touched = new Set<string>();
  /** The job (dedupKey) of each message id sent. */
  readonly keyOfMessage = new Map<string, string>();
  /** Handler runs per job that reached its failure point (flaky jobs fail the first `failRuns`). */
  readonly handlerRuns = new Map<string, number>();
  /** Ops (`dedupKey#step`) and their credit. */
  readonly ops = new Map<string, OpSpec>();
  readonly workers: ModelWorker[] = [];
  /** Receives of each job's messages (all copies). */
  readonly receives = new Map<string, number>();
  /** Receives of one job after which it counts as looping (see receiveBound). */
  readonly receiveBound: number;
  /** Runs each job's handler started. */
  readonly runsStarted = new Map<string, number>();
  /** The message each job was marked DEAD under (its lease's), and the dead keys sent a fresh copy. */
  readonly deadMessages = new Map<string, string>();
  readonly #freshSent = new Set<string>();
  /** Per key, protocol writes in flight and started: a history append is audited only when none raced it. */
  readonly #writes = new Map<string, { inFlight: number; started: number }>();
  /** Per job, the commits the store refused for a DynamoDB limit (ValidationException). */
  readonly limitRefusals = new Map<string, number>();
  /**
   * Named leases taken, by {@link leaseId} (key and token: a token is unique per key only, so a job's
   * tenant slot and cap slot often carry the same one): who took it, and whether the answer reached
   * the worker.
   */
  readonly acquisitions = new Map<string, { worker: string; dedupKey: string; delivered: boolean }>();
  /**
   * Named leases (by {@link leaseId}) whose release failed with an injected outage: they are left to
   * expire (the store could not be told), which named-lease.ts documents; held-after-settle does not
   * count them.
   */
  readonly releaseFailed = new Set<string>();
  /**
   * Named leases (by {@link leaseId}) whose release was sent and not yet answered: a run left behind gives
   * its slots up when it ends (limits.ts, releaseSlotsAfterRuns), which may be just before every job has
   * settled, with the release still on its way (a slow store call).
   */
  readonly releasing = new Set<string>();
  /** Leases (by {@link leaseId}) already reported as renewed by an orphan (one violation each). */
  readonly orphansSeen = new Set<string>();
  /** Jobs that get a message of another type under their dedupKey (review kind `collision`). */
  readonly collided = new Set<string>();
  readonly #trace: TraceEntry[] = [];
  /** Orders the runs' starts and commits (several happen at one virtual instant). */
  seq = 0;
  /** Handler runs of the limited types (steer kind `concurrency`), with their last accepted commit. */
  readonly runs: ModelRun[] = [];
  /** Handler runs still going, by `<worker>/<dedupKey>` (a run left behind at its deadline included). */
  readonly liveRuns = new Map<string, number>();
  /** The run each credit was made in (a commit that applies it counts for that run). */
  readonly runOfEffect = new WeakMap<Effect, ModelRun>();
  /** Per `worker messageId`, the claims and fast commits sent (a bounce sends none). */
  readonly claimCalls = new Map<string, number>();
  /** Per job, its bounces (outcome `limited`): receives that are no attempt. */
  readonly bounces = new Map<string, number>();
  /** Per job, its FIFO records handed back unstarted (outcome `deferred`): receives that are no attempt. */
  readonly deferred = new Map<string, number>();
  /** Slot keys (`slot:*`) ever acquired. */
  readonly slotKeys = new Set<string>();
  /** Per job, the acknowledged cancel (steer kind `cancel`): when, and its letters then. */
  readonly cancelAcked = new Map<string, { at: number; letters: number; outcome: string }>();
  /** When each dead letter's send was asked for (ModelQueue). */
  readonly letterSentAt = new WeakMap<object, number>();
  /** Per job, every cancel answer or error. */
  readonly cancelAnswers = new Map<string, string[]>();
  /** Per rate key, the grants answered (virtual ms). */
  readonly rateGrants = new Map<string, number[]>();
  /** The rate store as the workers see it. */
  readonly workerRates: RateStore;
  #pending = 0;
  #stuck: string | undefined;
  stopped = false;

  /**
   * The store as the workers see it: the shared one (unless a self-test wraps it), behind the audit of
   * its answers.
   */
  readonly workerStore: JobStore;
  /** Per job, the writes that answered "completed" (a fenced complete or a fast commit). */
  readonly completions = new Map<string, string[]>();

  /** The queue as the workers see it (the shared one, unless a self-test wraps it). */
  readonly workerQueue: JobQueue;
  /** The named-lease store as the workers see it (the shared one, unless a self-test wraps it). */
  readonly workerLeases: LeaseStore;
  /** Issue 31's kinds (meet.ts): the keys' lives, the DLQ as SQS shows it, the operator's redrives. */
  readonly meet: Meet;

  constructor(scenario: Scenario, options: RunOptions) {
    const { wrapStore, wrapQueue, wrapLeases, wrapRates } = options;
    this.scenario = scenario;
    this.applier = new CommittedEffects(this);
    // Grants are noted as the take's write lands, with the stamp it logged (an answer delayed or lost
    // after the write still counts). A store a test puts in its place is noted by its answers.
    this.model = new ModelDb(
      {
        committed: (effects) => this.applier.committed(effects),
        granted: (key, at) => this.rateGranted(key, at),
      },
      rateSharding(scenario.seed),
    );
    this.store = this.model.store;
    modelJobStore(this.model.store);
    this.leases = this.model.leases;
    this.rates = this.model.rates;
    this.workerRates = wrapRates ? answeredGrants(wrapRates(this.rates), this) : this.rates;
    this.workerQueue = wrapQueue ? wrapQueue(this.queue) : this.queue;
    this.workerLeases = wrapLeases ? wrapLeases(this.leases) : this.leases;
    this.rng = prng(scenario.seed);
    this.workerStore = new AuditStore(wrapStore ? wrapStore(this.store, this.model) : this.store, this);
    this.meet = new Meet(this);
    this.registry = modelRegistry(this);
    this.logger = traceLogger(this);
    scenario.jobs.forEach((job, index) => {
      job.steps.forEach((op, step) => {
        this.ops.set(`${jobKey(index)}#s${step + 1}`, op);
      });
      if (!job.poison && job.final) this.ops.set(`${jobKey(index)}#final`, job.final);
    });
    for (const dup of scenario.duplicates) {
      if (!dup.otherType) continue;
      const key = jobKey(dup.job % scenario.jobs.length);
      this.collided.add(key);
      this.ops.set(`${key}#other`, OTHER_OP);
    }
    this.receiveBound = receiveBound(scenario);
  }

  start(): void {
    const s = this.scenario;
    s.jobs.forEach((_, index) => {
      this.send(index, 0);
    });
    s.duplicates.forEach((dup) => {
      const index = dup.job % s.jobs.length;
      this.later(dup.atMs, () => {
        this.stats.duplicateSends += 1;
        this.send(index, dup.sameBody ? 0 : this.stats.duplicateSends, dup.otherType);
      });
    });
    for (const fault of s.faults) setTimeout(() => this.arm(fault), fault.atMs);
    for (const cancel of s.cancels ?? []) {
      this.later(cancel.atMs, () => void this.cancel(jobKey(cancel.job % s.jobs.length), 0));
    }
    this.meet.start();
    for (let slot = 0; slot < s.workers; slot++) this.spawn(slot, 0);
  }

  hold(delta: 1 | -1): void {
    this.#pending += delta;
  }

  peek(dedupKey: string): JobItem | undefined {
    return this.model.peek(dedupKey);
  }

  elapsed(): number {
    return Date.now() - T0;
  }

  /** Runs the virtual clock until the queue is empty and every live worker idle, or the budget is spent. */
  async drive(): Promise<void> {
    const end = T0 + BUDGET_MS;
    await flush();
    while (!this.#done()) {
      if (Date.now() >= end) {
        this.#stuck = `virtual time budget (${BUDGET_MS} ms) spent`;
        break;
      }
      if (vi.getTimerCount() === 0) {
        this.#stuck = 'nothing left to happen (no timer pending) but the run is not done';
        break;
      }
      if (this.#looping) {
        this.#stuck = this.#looping;
        break;
      }
      if (++this.stats.timers > MAX_TIMERS) {
        this.#stuck = `livelock: ${MAX_TIMERS} timers fired`;
        break;
      }
      vi.advanceTimersToNextTimer();
      await flush();
    }
    this.stats.virtualMs = Date.now() - T0;
    this.stopped = true;
    this.log('info', 'run ends', { stuck: this.#stuck, queue: this.queue.size });
  }

  #looping: string | undefined;

  /** A batch was received: counts each job's receives, and ends the run when one is past the bound. */
  onReceive(records: readonly SQSRecord[]): void {
    this.meet.received(records);
    for (const record of records) {
      const key = this.keyOfMessage.get(record.messageId) ?? '?';
      const n = (this.receives.get(key) ?? 0) + 1;
      this.receives.set(key, n);
      this.stats.maxReceives = Math.max(this.stats.maxReceives, n);
      // A bounce (a limit's wait) uses no attempt; its own bound catches a job that never gets a slot.
      const bounced = this.bounces.get(key) ?? 0;
      if (bounced > BOUNCE_BOUND && !this.#looping) {
        this.#looping = `[concurrency/bounded-bounces] ${key} bounced ${bounced} times (bound ${BOUNCE_BOUND}) without running`;
      }
      // Nor does a FIFO record handed back unstarted behind its group's head.
      if (n - bounced - (this.deferred.get(key) ?? 0) > this.receiveBound && !this.#looping) {
        this.#looping = `[bounded-receives] ${key} received ${n} times (bound ${this.receiveBound}) without ending COMPLETED or DEAD`;
      }
    }
  }

  #done(): boolean {
    return this.#pending === 0 && this.queue.size === 0 && this.workers.every((w) => w.ports.dead || !w.busy);
  }

  /**
   * Sends job `index`: `copy` 0 is the original body (a same-body duplicate too), n a new envelope;
   * `other`: a message of another type (`model.other`) under the same dedupKey, whose envelope's
   * createdAt is 1 ms later, so the item (which keeps its first claim's createdAt) tells which type
   * created it.
   */
  send(index: number, copy: number, other = false): void {
    const spec = this.scenario.jobs[index] as JobSpec;
    const body = JSON.stringify(
      makeEnvelope({
        id: `job-${index}-e${copy}`,
        dedupKey: jobKey(index),
        type: other ? OTHER_TYPE : jobType(spec),
        payload: { job: index },
        // A fresh send after a dead key's TTL (copy 1000 on) is a new send: created when it is sent.
        createdAt: new Date(other ? T0 + 1 : copy >= 1000 ? Date.now() : T0),
      }),
    );
    const messageId = this.queue.send(
      body,
      this.scenario.fifo ? { groupId: fifoGroup(spec, jobKey(index)) } : {},
    );
    this.keyOfMessage.set(messageId, jobKey(index));
    this.log('info', 'sent', { dedupKey: jobKey(index), messageId, copy });
  }

  /** Schedules a harness event the run waits for (a duplicate send, a restart). */
  later(ms: number, event: () => void): void {
    this.#pending += 1;
    setTimeout(() => {
      this.#pending -= 1;
      if (!this.stopped) event();
    }, ms);
  }

  spawn(slot: number, generation: number): void {
    const mine = this.scenario.crashes.filter((c) => c.slot % this.scenario.workers === slot);
    const worker = new ModelWorker(this, slot, generation, mine[generation]);
    this.workers[slot] = worker;
    if (generation > 0) this.stats.restarts += 1;
    this.log('info', 'worker starts', { worker: worker.id });
    void worker.loop();
  }

  /** A worker died (a planned crash, or a Lambda invocation killed at its timeout): replace it later. */
  onDeath(worker: ModelWorker, why: string, restartAfterMs: number): void {
    if (why === 'timeout') this.stats.timeouts += 1;
    else this.stats.crashes += 1;
    this.log('warn', `worker killed (${why})`, { worker: worker.id, calls: worker.ports.calls });
    // Its slots free within one slot lease (the job lease): no renewal of its lands past that.
    const diedAt = Date.now();
    setTimeout(() => this.slotsFreed(worker.id, diedAt), this.scenario.leaseMs + 1);
    this.later(restartAfterMs, () => this.spawn(worker.slot, worker.generation + 1));
  }

  arm(fault: FaultSpec): void {
    const when = fault.mode.endsWith('before') ? 'before' : 'after';
    const options = { times: fault.times, when } as const;
    const fail = fault.mode.startsWith('fail');
    const error = () => {
      if (when === 'after') this.stats.lostAnswers += 1;
      else this.stats.outages += 1;
      return injectedFault(fault.mode);
    };
    if (fault.target === 'store') {
      // At the request boundary: the operation each adapter names in its send options.
      const op = STORE_OPS[fault.op % STORE_OPS.length] ?? 'claim';
      if (fail) this.model.db.faults.failNext(op, error, options);
      else this.model.db.faults.delayNext(op, fault.delayMs, options);
    } else {
      const op = QUEUE_OPS[fault.op % QUEUE_OPS.length] ?? 'delete';
      const queueError = (operation: string) => new StoreUnavailableError(operation, error());
      if (fail) this.queue.faults.failNext(op, queueError, options);
      else this.queue.faults.delayNext(op, fault.delayMs, options);
    }
    this.log('info', 'fault armed', { ...fault });
  }

  /** A commit the store refused as invalid (a DynamoDB limit, review kind `limits`). */
  limitRefused(dedupKey: string, error: unknown): void {
    const refused =
      error instanceof StoreRefusedError || (error instanceof Error && error.name === 'ValidationException');
    if (!refused) return;
    this.stats.limitRefusals += 1;
    this.limitRefusals.set(dedupKey, (this.limitRefusals.get(dedupKey) ?? 0) + 1);
  }

  /** Excuses every job a live worker has in hand (a blocking job stalls the shared clock). */
  touchAllInHand(): void {
    for (const w of this.workers) {
      if (w.ports.dead || !w.busy) continue;
      for (const id of w.batch.keys()) this.touch(w.id, this.keyOfMessage.get(id) ?? '?');
    }
  }

  touch(worker: string, dedupKey: string): void {
    this.touched.add(`${worker} ${dedupKey}`);
  }

  /** Calls in flight per `worker dedupKey`, with their start times (a call still waiting is a slow one). */
  readonly inFlight = new Map<string, number[]>();

  callStarted(worker: string, dedupKey: string, at: number): void {
    const key = `${worker} ${dedupKey}`;
    this.inFlight.set(key, [...(this.inFlight.get(key) ?? []), at]);
  }

  callEnded(worker: string, dedupKey: string, at: number): void {
    const key = `${worker} ${dedupKey}`;
    const left = [...(this.inFlight.get(key) ?? [])];
    left.splice(left.indexOf(at), 1);
    this.inFlight.set(key, left);
  }

  /** True when one of the worker's calls about the job has been waiting since before now. */
  #waiting(worker: string, dedupKey: string): boolean {
    return (this.inFlight.get(`${worker} ${dedupKey}`) ?? []).some((at) => at < Date.now());
  }

  onOutcome(worker: ModelWorker, record: SQSRecord, outcome: RecordOutcome): void {
    // A killed process reports nothing: its timers (the heartbeat's watchdog) may still fire in this
    // simulation, but a real kill takes them along.
    if (worker.ports.dead) return;
    const key = outcome.dedupKey ?? this.keyOfMessage.get(record.messageId) ?? '?';
    this.log('info', `outcome ${outcome.action}/${outcome.disposition}`, {
      worker: worker.id,
      dedupKey: key,
      messageId: record.messageId,
    });
    this.meet.ops.outcome(record, outcome);
    if (outcome.action === 'deferred') this.deferred.set(key, (this.deferred.get(key) ?? 0) + 1);
    if (outcome.action === 'limited' || outcome.action === 'resent') {
      this.bounces.set(key, (this.bounces.get(key) ?? 0) + 1);
      this.stats.bounces += 1;
      const before = worker.claimsAtReceive.get(record.messageId) ?? 0;
      const after = this.claimCalls.get(`${worker.id} ${record.messageId}`) ?? 0;
      if (after !== before) {
        this.violations.push(
          `[concurrency/bounce-used-attempt] ${worker.id} bounced ${key} (message ${record.messageId}) at ` +
            `t=${Date.now() - T0} ms after ${after - before} claim(s) of it: a wait for a limit must not use an attempt`,
        );
      }
    }
    if (outcome.action === 'lease-lost' || outcome.action === 'lease-ran-out') {
      // Excused: a call about this job failed, was slow, or is still waiting (a slow call the heartbeat
      // gave up on before it returned).
      if (this.touched.has(`${worker.id} ${key}`) || this.#waiting(worker.id, key))
        this.stats.leaseLostExcused += 1;
      else {
        this.violations.push(
          `healthy owner aborted: ${worker.id} got lease-lost on ${key} (message ${record.messageId}) at ` +
            `t=${Date.now() - T0} ms, though none of its calls about ${key} failed or was slow`,
        );
      }
    }
  }

  /** Whether `worker` has a message of job `dedupKey` in hand (an attempt of it may be running). */
  processing(worker: string, dedupKey: string): boolean {
    const w = this.workers.find((x) => x.id === worker);
    if (!w || w.ports.dead || !w.busy) return false;
    return [...w.batch.keys()].some((id) => this.keyOfMessage.get(id) === dedupKey);
  }

  workerDead(worker: string): boolean {
    const w = this.workers.find((x) => x.id === worker);
    return w === undefined || w.ports.dead;
  }

  /**
   * A named-lease renewal by `worker` for job `dedupKey`: one made while the worker holds no message of
   * that job comes from an attempt that has ended (an orphan heartbeat, review kind `named-lease`).
   */
  leaseRenewed(worker: string, dedupKey: string, lease: NamedLease): void {
    // A killed worker's timers still fire in the model (a real process would be gone), but its calls
    // hang at its ports and reach no store: its heartbeat renews nothing, so it is no orphan.
    if (this.workerDead(worker)) return;
    // Only a lease its attempt knows it holds is renewed: one whose acquire answer was lost and which
    // the retried acquire recognised as its own (isOwnAcquire) counts as delivered from here on.
    const id = leaseId(lease.key, lease.token);
    const taken = this.acquisitions.get(id);
    if (taken && taken.worker === worker && !taken.delivered) taken.delivered = true;
    if (this.processing(worker, dedupKey) || this.orphansSeen.has(id)) return;
    this.orphansSeen.add(id);
    const kind = lease.key.startsWith('slot:') ? 'concurrency' : 'named-lease';
    this.violations.push(
      `[${kind}/orphan-heartbeat] ${worker} renewed named lease ${lease.key} (token ${lease.token}) ` +
        `for ${dedupKey} at t=${Date.now() - T0} ms, after its attempt of ${dedupKey} had ended`,
    );
  }

  /**
   * A job's `withLease` gave up with LeaseBusyError: a violation when the holder is an earlier attempt of
   * the same job that has ended (its worker alive and no longer on the job), or whose acquire answer was lost.
   */
  async leaseBusy(worker: string, dedupKey: string, name: string): Promise<void> {
    const item: LeaseItem | undefined = this.model.peekLease(name);
    if (!item?.owner || !(item.leaseUntil >= Date.now())) return;
    const id = leaseId(name, item.token);
    const holder = this.acquisitions.get(id);
    if (!holder || holder.dedupKey !== dedupKey) return;
    // A killed worker releases nothing, whether or not its acquire answer arrived: its lease expires
    // after one lease length, and the wait of a later attempt may run out first. (Nor does a killed
    // worker's own code, which the model lets run on with its calls hung, report anything real.) A lease
    // whose release failed with an outage is left to expire likewise (see releaseFailed).
    // Nor is a lease whose release is on its way (slow to land): the attempt gave it back.
    if (
      this.workerDead(worker) ||
      this.workerDead(holder.worker) ||
      this.releaseFailed.has(id) ||
      this.releasing.has(id)
    ) {
      return;
    }
    // Another worker's attempt that may still run (stalled) is not "ended", whether or not its acquire's
    // answer reached it yet: stalled before its next try, it has not learned the lease is its own (the
    // retry recognises it, or the attempt gives it back when it ends).
    const elsewhere = holder.worker !== worker;
    if (elsewhere && this.processing(holder.worker, dedupKey)) return;
    this.violations.push(
      `[named-lease/busy-own-attempt] ${dedupKey} on ${worker} died LeaseBusyError on ${name} at ` +
        `t=${Date.now() - T0} ms, held (token ${item.token}) by its own earlier attempt on ${holder.worker}` +
        (holder.delivered ? '' : ' whose acquire answer was lost'),
    );
  }

  /**
   * A write carrying `effects` answered (`ok`), or was refused by its fence or the claim's condition, or
   * hit an effect conflict: the effects must have been applied exactly when it says ok (all or none).
   */
  audited(what: string, dedupKey: string, effects: readonly Effect[], ok: boolean): void {
    if (effects.length === 0) return;
    const applied = this.applier.batches.has(effects);
    if (ok && !applied) this.violations.push(`${what} on ${dedupKey} answered ok but applied no effect`);
    if (!ok && applied) {
      this.violations.push(`${what} on ${dedupKey} was refused or conflicted, yet its effects were applied`);
    }
  }

  /** A protocol write (one that may move status, owner, token, attempts, version) on `dedupKey`. */
  async protocolWrite<T>(dedupKey: string, call: () => Promise<T>): Promise<T> {
    const w = this.#writesOf(dedupKey);
    w.inFlight += 1;
    w.started += 1;
    const before = this.meet.ops.beforeWrite(dedupKey);
    try {
      return await call();
    } finally {
      w.inFlight -= 1;
      this.stillCancelled(dedupKey);
      this.meet.ops.wrote(dedupKey, before);
    }
  }

  /** After an acknowledged cancel the job stays CANCELLED, whatever write comes. */
  stillCancelled(dedupKey: string): void {
    const acked = this.cancelAcked.get(dedupKey);
    if (!acked) return;
    const status = this.model.peek(dedupKey)?.status;
    if (status !== JobStatus.Cancelled && !this.cancelAnswers.get(dedupKey)?.includes('moved')) {
      this.cancelAnswers.get(dedupKey)?.push('moved');
      this.violations.push(
        `[cancel/status-moved] ${dedupKey} is ${status ?? 'absent'} at t=${Date.now() - T0} ms, after its cancel was acknowledged (${acked.outcome}) at t=${acked.at - T0} ms`,
      );
    }
  }

  /**
   * Steer kind `cancel`: an operator cancels job `dedupKey` through the store (the wrapped one, so a
   * self-test's broken store is the one asked). An error (an outage, a lost answer) is tried again once.
   */
  async cancel(dedupKey: string, retry: number): Promise<void> {
    const store = this.workerStore;
    if (!store.cancel) return;
    this.#pending += 1;
    const answers = this.cancelAnswers.get(dedupKey) ?? [];
    this.cancelAnswers.set(dedupKey, answers);
    try {
      // The operator's cancel (shared/ops/cancel.ts), on this store (operators.ts).
      const answer: CancelResult = await this.meet.ops.cancel(dedupKey, {
        now: Date.now(),
        by: 'model',
        reason: 'steer kind cancel',
      });
      answers.push(answer.outcome);
      this.log('info', `cancel answered ${answer.outcome}`, { dedupKey });
      if (answer.outcome !== 'finished' && !this.cancelAcked.has(dedupKey)) {
        const letters = this.queue.deadLetters.filter(
          (l) =>
            l.reason.dedupKey === dedupKey &&
            !refusedPayload(this.scenario, l.reason) &&
            !editedAway(this.scenario, l.reason),
        ).length;
        this.cancelAcked.set(dedupKey, { at: Date.now(), letters, outcome: answer.outcome });
        this.stats.cancels += 1;
      }
      this.stillCancelled(dedupKey);
    } catch (error) {
      answers.push('error');
      this.log('info', 'cancel failed', { dedupKey, error: describeError(error) });
      if (retry === 0) this.later(1000, () => void this.cancel(dedupKey, 1));
    } finally {
      this.#pending -= 1;
    }
  }

  /** A run of a limited type starts (steer kind `concurrency`). */
  runStarted(spec: JobSpec, dedupKey: string, worker: string): ModelRun | undefined {
    if (spec.tenant === undefined || !this.scenario.concurrency) return undefined;
    const run: ModelRun = {
      dedupKey,
      worker,
      tenant: spec.tenant,
      start: ++this.seq,
      startAt: Date.now(),
    };
    this.runs.push(run);
    return run;
  }

  /** A worker's slot leases, at one slot lease after its death: none may last past that. */
  slotsFreed(worker: string, diedAt: number): void {
    for (const key of this.slotKeys) {
      const item = this.model.peekLease(key);
      if (!item?.owner?.startsWith(`${worker}/`)) continue;
      if (item.leaseUntil > diedAt + this.scenario.leaseMs) {
        this.violations.push(
          `[concurrency/slot-outlives-crash] slot ${key} (token ${item.token}) of ${worker}, killed at ` +
            `t=${diedAt - T0} ms, is held until t=${item.leaseUntil - T0} ms, past one slot lease (${this.scenario.leaseMs} ms)`,
        );
      }
    }
  }

  /** A permit granted (steer kind `rate`). */
  rateGranted(key: string, now: number): void {
    const all = this.rateGrants.get(key) ?? [];
    all.push(now);
    this.rateGrants.set(key, all);
    this.stats.permits += 1;
  }

  #writesOf(dedupKey: string): { inFlight: number; started: number } {
    let w = this.#writes.get(dedupKey);
    if (w === undefined) {
      w = { inFlight: 0, started: 0 };
      this.#writes.set(dedupKey, w);
    }
    return w;
  }

  /**
   * A best-effort history append (`what`): it never moves a protocol field, and no history passes
   * HISTORY_MAX. Compared only when no protocol write on the key was in flight or started meanwhile.
   */
  async historyAppend(what: string, dedupKey: string, call: () => Promise<void>): Promise<void> {
    const w = this.#writesOf(dedupKey);
    const calm = w.inFlight === 0;
    const started = w.started;
    const before = this.model.peek(dedupKey);
    try {
      await call();
    } finally {
      const after = this.model.peek(dedupKey);
      if (calm && w.started === started && before !== undefined && after !== undefined) {
        for (const field of ['status', 'owner', 'token', 'attempts', 'version', 'leaseUntil'] as const) {
          if (before[field] !== after[field]) {
            this.violations.push(
              `[history/protocol-field] ${what} on ${dedupKey} moved ${field} from ${before[field]} to ${after[field]}`,
            );
          }
        }
      }
      if ((after?.history?.length ?? 0) > HISTORY_MAX) {
        this.violations.push(
          `[history/max] ${what} on ${dedupKey} left ${after?.history?.length} events (max ${HISTORY_MAX})`,
        );
      }
    }
  }

  /** Job `dedupKey` is being marked DEAD: with a `deadKeyTtl`, a fresh copy follows it. */
  markingDead(dedupKey: string): void {
    this.meet.ops.markingDead(dedupKey);
    const ttl = this.scenario.deadKeyTtl;
    if (ttl === undefined || this.#freshSent.has(dedupKey)) return;
    this.#freshSent.add(dedupKey);
    const index = Number(dedupKey.replace(/^job-/, ''));
    if (!Number.isInteger(index) || this.scenario.jobs[index] === undefined) return;
    // Just past the TTL (the dead marking may land a little after this call starts).
    this.later(ttl * 1000 + 1000, () => this.send(index, 1000 + this.#freshSent.size));
  }

  /** A claim answered that it reset a DEAD key: never for the dead job's own message. */
  resetClaimed(request: ClaimRequest): void {
    if (this.deadMessages.get(request.dedupKey) === request.messageId) {
      this.violations.push(
        `[history/reset-own-message] ${request.dedupKey} was reset by the claim of ${request.messageId}, the message it died under`,
      );
    }
    // A new life: the message an earlier life died under is none of its own (back after its delete failed,
    // it resets the key as a fresh send would, once this life is dead past its deadKeyUntil).
    this.deadMessages.delete(request.dedupKey);
  }

  /** A write answered that it completed the job: that may happen once per job. */
  completedBy(dedupKey: string, what: string): void {
    const all = [...(this.completions.get(dedupKey) ?? []), `${what} at t=${Date.now() - T0}`];
    this.completions.set(dedupKey, all);
    if (all.length === 2) this.violations.push(`${dedupKey} completed twice: ${all.join(', ')}`);
  }

  /** A claim or fast commit is sent by a worker for a message (a bounce sends none). */
  claimSent(request: { owner: string; messageId: string }): void {
    const key = `${request.owner} ${request.messageId}`;
    this.claimCalls.set(key, (this.claimCalls.get(key) ?? 0) + 1);
  }

  /** A fast commit is sent: only for a fast type, and only on its message's first receive. */
  fastCommitSent(request: FastCommitRequest): void {
    if (!request.type.startsWith(FAST_PREFIX)) {
      this.violations.push(`fast commit of ${request.dedupKey}, whose type ${request.type} is not fast`);
    }
    const receives = this.workers.find((w) => w.id === request.owner)?.batch.get(request.messageId);
    if (receives !== undefined && receives > 1) {
      this.violations.push(
        `fast path on a redelivery: ${request.owner} ran ${request.dedupKey} unclaimed on receive ` +
          `${receives} of message ${request.messageId}`,
      );
    }
  }

  /**
   * Review kind `named-lease`: runs `work` inside `ctx.withLease`. On the job's first run, a fault on
   * its acquire: `slow` lands after the invocation's deadline, `lost` lands and loses its answer.
   */
  async withNamedLease<R>(ctx: JobContext, spec: JobSpec, run: number, work: () => Promise<R>): Promise<R> {
    const lease = spec.lease as NonNullable<JobSpec['lease']>;
    const name = LEASE_NAMES[lease.name % LEASE_NAMES.length] as string;
    if (run === 1 && lease.acquire === 'slow') {
      this.model.db.faults.delayNext('lease-acquire', this.scenario.source.timeoutMs, { when: 'before' });
    }
    if (run === 1 && lease.acquire === 'lost') {
      this.model.db.faults.failNext('lease-acquire', () => injectedFault('acquire answer lost'), {
        when: 'after',
      });
    }
    try {
      return await ctx.withLease(name, () => work(), {
        ...(lease.leaseMs === undefined ? {} : { leaseMs: lease.leaseMs }),
        ...(lease.waitMs === undefined ? {} : { waitMs: lease.waitMs }),
      });
    } catch (error) {
      if (error instanceof LeaseBusyError) await this.leaseBusy(ctx.worker, ctx.dedupKey, name);
      throw error;
    }
  }

  /** 0-3 extra microtask turns: reorders concurrent work at the same virtual instant. */
  async jitter(): Promise<void> {
    const turns = Math.floor(this.rng() * 4);
    for (let i = 0; i < turns; i++) await Promise.resolve();
  }

  /**
   * An effect crediting `op` through the job's effect table, read now and committed later (optimistic:
   * conflicts are possible).
   */
  async credit(ctx: JobContext, opId: string, op: OpSpec, run?: ModelRun): Promise<Effect> {
    const effect = await this.#credit(ctx, opId, op);
    if (run) this.runOfEffect.set(effect, run);
    return effect;
  }

  async #credit(ctx: JobContext, opId: string, op: OpSpec): Promise<Effect> {
    const ledger = ctx.tables[LEDGER_TABLE.name] as EffectTable;
    const seen = await ledger.get<{ balance: number; version: number }>({ account: op.account });
    await this.jitter();
    return ledger.versionedPut({
      key: { account: op.account },
      seenVersion: seen?.version,
      item: { balance: (seen?.balance ?? 0) + op.delta, lastOp: opId },
    });
  }

  log(level: string, message: string, extra: Record<string, unknown> = {}): void {
    if (this.#trace.length < TRACE_LIMIT) this.#trace.push([Date.now() - T0, level, message, extra]);
  }

  formatTrace(): string {
    return this.#trace
      .map(([at, level, message, extra]) => {
        const { worker, dedupKey, ...rest } = extra;
        const who = [worker, dedupKey].filter((x) => x !== undefined).join(' ');
        const more = Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : '';
        return `${String(at).padStart(7)} ${level.padEnd(5)} ${who.padEnd(14)} ${message}${more}`;
      })
      .join('\n');
  }

  /** The invariants, checked once the run has ended. */
  async check(): Promise<string[]> {
    this.model.db.faults.clear();
    this.queue.faults.clear();
    const v = [...this.violations];
    const s = this.scenario;
    if (this.#stuck) v.push(`run did not finish: ${this.#stuck}`);
    // A run cut short by a looping job leaves the others unfinished: that is the loop's consequence.
    if (this.#looping) return v;
    if (this.queue.size > 0) {
      const left = this.queue.messages().map((m) => `${m.messageId} (${this.keyOfMessage.get(m.messageId)})`);
      v.push(`nothing left behind: ${this.queue.size} message(s) still in the queue: ${left.join(', ')}`);
    }
    // A dead key reset by a fresh send (deadKeyTtl) is a new job: its steps run again, once per reset.
    const resets = new Map<string, number>();
    for (const index of s.jobs.keys()) {
      const key = jobKey(index);
      const history = this.model.peek(key)?.history ?? [];
      if (history.length > HISTORY_MAX) v.push(`[history/max] ${key} ends with ${history.length} events`);
      let n = 0;
      for (const event of history) {
        if (event.e === 'reset') n += 1;
        else if (event.e === 'lease-lost') this.stats.leaseLostEvents += 1;
        else if (event.e === 'dropped') this.stats.droppedCopies += event.count;
      }
      resets.set(key, n);
      this.stats.resets += n;
    }
    // So is a job a redrive reset (issue 31's operator): its steps may run once more per redrive.
    for (const [key, n] of this.meet.redriveResets) resets.set(key, (resets.get(key) ?? 0) + n);
    const resetsOf = (op: string) => resets.get(op.split('#')[0] ?? '') ?? 0;
    // Every effect at most once (a step once per reset more); only known ops.
    for (const [op, count] of this.applier.applied) {
      if (!this.ops.has(op)) v.push(`unknown effect ${op} applied`);
      const allowed = op.endsWith('#final') || op.endsWith('#other') ? 1 : 1 + resetsOf(op);
      if (count > allowed) {
        v.push(
          allowed === 1
            ? `effect applied more than once: ${op} x${count}`
            : `[history/rerun-per-reset] effect ${op} applied ${count} times over ${allowed - 1} reset(s)`,
        );
      }
    }
    // Balances match the applications counted (no lost update through the optimistic check).
    for (const account of ACCOUNTS) {
      let expected = 0;
      for (const [op, spec] of this.ops) {
        if (spec.account === account) expected += spec.delta * (this.applier.applied.get(op) ?? 0);
      }
      const row = this.model.ledgerRow(account);
      const actual = row?.balance ?? 0;
      if (actual !== expected)
        v.push(`ledger ${account}: balance ${actual}, applied credits sum to ${expected}`);
    }
    // Named leases: none held, once every job has settled, by an attempt whose worker knew it took it.
    for (const name of LEASE_NAMES) {
      const item = this.model.peekLease(name);
      const id = item ? leaseId(name, item.token) : '';
      const holder = this.acquisitions.get(id);
      if (!item?.owner || !(item.leaseUntil >= Date.now()) || !holder?.delivered) continue;
      // A release refused by an outage cannot do better than let the lease expire (after one lease length,
      // unrenewed): not a leak. A lease nobody tried to release still counts.
      if (this.workerDead(holder.worker) || this.releaseFailed.has(id)) continue;
      v.push(
        `[named-lease/held-after-settle] named lease ${item.leaseKey} (token ${item.token}) still held by ` +
          `${holder.worker} for ${holder.dedupKey} until t=${item.leaseUntil - T0} ms after every job settled`,
      );
    }
    v.push(...this.#steerProblems());
    this.stats.refusedLetters = this.queue.refusedLetters;
    for (const [index, spec] of s.jobs.entries()) {
      const key = jobKey(index);
      const item: JobItem | undefined = await this.store.get(key);
      const allLetters = this.queue.deadLetters.filter((l) => l.reason.dedupKey === key);
      const applied = (op: string) => this.applier.applied.get(op) ?? 0;
      const status = item?.status;
      // Two types under one key: the item belongs to the type whose message created it (its createdAt).
      const otherCreated = item?.createdAt === new Date(T0 + 1).toISOString();
      const ownType = otherCreated ? OTHER_TYPE : jobType(spec);
      const letterType = (l: { body: string }) => (JSON.parse(l.body) as { type?: string }).type;
      const letters = allLetters.filter((l) => letterType(l) === ownType);
      // A cancelled job stops where its cancel found it: its review kind's expected end does not apply.
      const cancelTried = this.cancelAnswers.has(key);
      const cancelled = status === JobStatus.Cancelled && cancelTried;
      if (this.collided.has(key) && !cancelled) {
        v.push(...this.#collisionProblems(key, spec, item, allLetters, ownType));
      }
      if (otherCreated) continue;
      const ops = [...spec.steps.map((_, i) => `${key}#s${i + 1}`), ...(spec.poison ? [] : [`${key}#final`])];
      const where = `${key} (${jobType(spec)})`;
      if (spec.limit && !cancelled) {
        const refused = this.limitRefusals.get(key) ?? 0;
        // Two refused commits per life (the fast path's and the leased run's); each fault, crash, stall or
        // duplicate of the schedule may cost one more (a dead-lettering it interrupted runs again).
        const allowed = 2 * (1 + (resets.get(key) ?? 0)) + interruptions(s);
        if (status !== JobStatus.Dead || refused > allowed) {
          v.push(
            `[limits/futile-runs] ${where} breaks DynamoDB's ${spec.limit} limit: ended ${status ?? 'absent'} ` +
              `after ${refused} refused commit(s) and ${this.runsStarted.get(key) ?? 0} run(s); expected DEAD within ${allowed}`,
          );
        }
      }
      // A message refused for its payload (issue 31 kind `schema`) is lettered before its item is looked at,
      // a cancelled job's too: not a letter of the job's run.
      const run = letters.filter((l) => !refusedPayload(s, l.reason) && !editedAway(s, l.reason));
      // A letter whose send was asked for before the cancel's ack (a dead-lettering fenced under an older
      // lease, its send slow past the takeover, the redrive and the cancel) is not one sent after it.
      const acked = this.cancelAcked.get(key);
      const late = acked
        ? run.filter((l) => (this.letterSentAt.get(l) ?? Number.POSITIVE_INFINITY) > acked.at)
        : [];
      if (cancelTried) v.push(...this.#cancelProblems(key, status, late.length));
      if (status === JobStatus.Cancelled) this.stats.cancelled += 1;
      const settled =
        status === JobStatus.Completed ||
        status === JobStatus.Dead ||
        (status === JobStatus.Cancelled && cancelTried);
      if (!settled) {
        v.push(
          `job ended neither COMPLETED nor DEAD: ${where} is ${status ?? 'absent'} ` +
            `(owner ${item?.owner ?? '-'}, token ${item?.token}, attempts ${item?.attempts}, ` +
            `leaseUntil t=${item ? item.leaseUntil - T0 : '-'}, messageId ${item?.messageId}, ` +
            `checkpoint ${JSON.stringify(item?.checkpoint?.done ?? [])}, lastError ${item?.lastErrorClass ?? '-'})`,
        );
      }
      if (status === JobStatus.Completed) {
        this.stats.completed += 1;
        for (const op of ops) {
          if (applied(op) < 1 || applied(op) > 1 + (op.endsWith('#final') ? 0 : (resets.get(key) ?? 0)))
            v.push(`${where} COMPLETED but its effect ${op} applied ${applied(op)} times`);
        }
        if (spec.poison) v.push(`${where}: the poison ended COMPLETED`);
      }
      if (status === JobStatus.Dead) {
        this.stats.dead += 1;
        if (!spec.poison && applied(`${key}#final`) !== 0) {
          v.push(`${where} DEAD but its final effect applied ${applied(`${key}#final`)} times`);
        }
      }
      // No run past the attempt budget: a leased claim past it dead-letters instead, and a fast commit is
      // refused by it (defect D2, fixed).
      const overBudget = status === JobStatus.Completed && (item?.attempts ?? 0) > s.maxAttempts;
      if (overBudget) {
        const d2 = oneWrite(item as JobItem);
        v.push(
          `${where} COMPLETED at attempt ${item?.attempts} of ${s.maxAttempts}` +
            (d2 ? ' by a fast commit (defect D2)' : ''),
        );
      }
      // DEAD iff a letter with its reasons.
      if (status === JobStatus.Dead && letters.length === 0) v.push(`${where} is DEAD with no dead letter`);
      // A reset key's letters are those of its dead runs.
      // A cancelled job's letters are checked by its cancel (none after the acknowledgment).
      if (
        status !== JobStatus.Dead &&
        status !== JobStatus.Cancelled &&
        letters.length > 0 &&
        (resets.get(key) ?? 0) === 0
      ) {
        v.push(
          `${where} is ${status ?? 'absent'} but has ${letters.length} dead letter(s): ` +
            letters.map((l) => `${l.reason.reason}/${l.reason.errorClass}`).join(', '),
        );
      }
      this.stats.letters += letters.length;
      this.stats.extraLetters += Math.max(0, letters.length - 1);
      for (const letter of letters) v.push(...letterProblems(letter.reason, letter.body, spec, s, where));
      if (!cancelled) v.push(...this.meet.jobProblems(key, spec, item, letters, where));
      if (spec.poison && status === JobStatus.Dead) {
        // Its first letter of a run (issue 32: a redrive's edited payload the schema refuses letters too).
        const first = letters.find((l) => !refusedPayload(s, l.reason) && !editedAway(s, l.reason))?.reason;
        if (first && first.reason !== 'permanent-error' && first.reason !== 'max-attempts') {
          v.push(`${where}: the poison's letter says ${first.reason}`);
        }
      }
    }
    const stray = this.queue.deadLetters.filter((l) => l.reason.dedupKey === undefined);
    if (stray.length > 0) v.push(`${stray.length} dead letter(s) without a dedupKey`);
    this.stats.takeovers = this.metrics.get(MetricName.LeaseExpired);
    this.stats.ownMessageEarly = this.metrics.get(MetricName.OwnMessageEarly);
    this.stats.optimisticConflicts = this.metrics.get(MetricName.OptimisticConflict);
    this.stats.fastFallbacks = this.metrics.get(MetricName.FastPathFallback);
    const injected = (faults: { injected: Map<string, number> }) =>
      [...faults.injected.values()].reduce((a, b) => a + b, 0);
    this.stats.slowCalls =
      injected(this.model.db.faults) +
      injected(this.queue.faults) -
      this.stats.outages -
      this.stats.lostAnswers;
    this.stats.fastFaults = this.model.db.faults.injected.get('claim-and-complete') ?? 0;
    return v;
  }

  /**
   * Steer kind `cancel`, job `key` (a cancel was sent): acknowledged, it ends CANCELLED with no letter
   * after the acknowledgment; answered `finished`, it was and stays COMPLETED or DEAD; either way, a
   * CANCELLED job never applied its final credit (a completed job answers `finished`).
   */
  #cancelProblems(key: string, status: string | undefined, letters: number): string[] {
    const problems: string[] = [];
    const answers = this.cancelAnswers.get(key) ?? [];
    const acked = this.cancelAcked.get(key);
    if (acked && status !== JobStatus.Cancelled) {
      problems.push(
        `[cancel/ends-cancelled] ${key} ends ${status ?? 'absent'} after its cancel was acknowledged (${acked.outcome}) at t=${acked.at - T0} ms`,
      );
    }
    if (acked && letters > 0) {
      problems.push(
        `[cancel/letter-after-ack] ${key} got ${letters} dead letter(s) sent after its cancel was acknowledged at t=${acked.at - T0} ms`,
      );
    }
    if (
      !acked &&
      answers.includes('finished') &&
      status !== JobStatus.Completed &&
      status !== JobStatus.Dead
    ) {
      problems.push(`[cancel/ends-cancelled] ${key} was answered finished, yet ends ${status ?? 'absent'}`);
    }
    if (status === JobStatus.Cancelled && (this.applier.applied.get(`${key}#final`) ?? 0) > 0) {
      problems.push(`[cancel/final-applied] ${key} ends CANCELLED, yet its final credit was applied`);
    }
    return problems;
  }

  /**
   * Steer kinds `concurrency` and `rate`: at no point more runs of a scope at once than its limit
   * (counting the runs that committed, from their start to their last commit the store accepted, in the
   * order these happened); no slot still held once every job settled; no more permits than the limit in
   * any window.
   */
  #steerProblems(): string[] {
    const problems: string[] = [];
    const s = this.scenario;
    const committed = this.runs.filter((r) => r.commit !== undefined);
    this.stats.limitedRuns = committed.length;
    if (s.concurrency) {
      const scopes: { name: string; limit: number; runs: ModelRun[] }[] = [];
      for (const tenant of new Set(committed.map((r) => r.tenant))) {
        scopes.push({
          name: `tenant t${tenant}`,
          limit: s.concurrency.perTenant,
          runs: committed.filter((r) => r.tenant === tenant),
        });
      }
      if (s.concurrency.cap !== undefined)
        scopes.push({ name: 'cap', limit: s.concurrency.cap, runs: committed });
      for (const scope of scopes) {
        const events = scope.runs
          .flatMap((r) => [
            { seq: r.start, run: r, d: 1 },
            { seq: r.commit as number, run: r, d: -1 },
          ])
          .sort((a, b) => a.seq - b.seq);
        const open = new Set<ModelRun>();
        let reported = false;
        for (const e of events) {
          if (e.d === 1) open.add(e.run);
          else open.delete(e.run);
          this.stats.maxOverlap = Math.max(this.stats.maxOverlap, open.size);
          if (open.size > scope.limit && !reported) {
            reported = true;
            const who = [...open]
              .map((r) => `${r.dedupKey} on ${r.worker} t=${r.startAt - T0}..${(r.commitAt ?? 0) - T0}`)
              .join(', ');
            problems.push(
              `[concurrency/over-limit] ${open.size} runs of ${scope.name} at once (limit ${scope.limit}), each committed: ${who}`,
            );
          }
        }
      }
      for (const key of this.slotKeys) {
        const item = this.model.peekLease(key);
        const id = item ? leaseId(key, item.token) : '';
        const holder = this.acquisitions.get(id);
        if (!item?.owner || !(item.leaseUntil >= Date.now()) || !holder?.delivered) continue;
        // A killed worker's slot, or one whose release an outage refused, runs out one slot lease after
        // its last renewal (limits.ts, releaseSlots): not a leak (slot-outlives-crash bounds the former).
        if (this.workerDead(holder.worker) || this.releaseFailed.has(id)) continue;
        // A run left behind that is still going keeps its slot, unrenewed, until it ends (limits.ts), and
        // then releases it: a release still on its way is not a leak (one that writes nothing still is).
        if ((this.liveRuns.get(`${holder.worker}/${holder.dedupKey}`) ?? 0) > 0) continue;
        if (this.releasing.has(id)) continue;
        problems.push(
          `[concurrency/held-after-settle] slot ${key} (token ${item.token}) still held by ${holder.worker} for ` +
            `${holder.dedupKey} until t=${item.leaseUntil - T0} ms after every job settled`,
        );
      }
    }
    if (s.rate) {
      const windowMs = s.rate.perSeconds * 1000;
      for (const [key, grants] of this.rateGrants) {
        const sorted = [...grants].sort((a, b) => a - b);
        for (let i = 0; i + s.rate.limit < sorted.length; i++) {
          const first = sorted[i] as number;
          const last = sorted[i + s.rate.limit] as number;
          if (last - first < windowMs) {
            problems.push(
              `[rate/over-limit] ${s.rate.limit + 1} permits of ${key} within ${last - first} ms ` +
                `(t=${first - T0}..${last - T0}; limit ${s.rate.limit} per ${windowMs} ms)`,
            );
            break;
          }
        }
      }
    }
    return problems;
  }

  /**
   * Review kind `collision`: job `key` also got messages of another type. The item belongs to the type
   * that created it: the other type's code never applies its effects or completes it, and each message
   * of the other type is dead-lettered with a reason of its own.
   */
  #collisionProblems(
    key: string,
    spec: JobSpec,
    item: JobItem | undefined,
    letters: readonly { body: string; reason: DeadLetterReason }[],
    ownType: string,
  ): string[] {
    const problems: string[] = [];
    const applied = (op: string) => this.applier.applied.get(op) ?? 0;
    const specOps = [
      ...spec.steps.map((_, i) => `${key}#s${i + 1}`),
      ...(spec.poison ? [] : [`${key}#final`]),
    ];
    const otherOwns = ownType === OTHER_TYPE;
    const foreignOps = otherOwns ? specOps : [`${key}#other`];
    const foreignType = otherOwns ? jobType(spec) : OTHER_TYPE;
    const foreign = foreignOps.filter((op) => applied(op) > 0);
    if (foreign.length > 0) {
      problems.push(
        `[collision/foreign-effects] ${key} belongs to ${ownType}, yet ${foreignType}'s code applied ${foreign.join(', ')}`,
      );
    }
    const ownFinal = otherOwns ? `${key}#other` : spec.poison ? undefined : `${key}#final`;
    if (item?.status === JobStatus.Completed && (ownFinal === undefined || applied(ownFinal) !== 1)) {
      problems.push(
        `[collision/wrong-type-completed] ${key} (created by ${ownType}) is COMPLETED without its own final effect ` +
          `(item type ${item.type})`,
      );
    }
    const foreignLetters = letters.filter(
      (l) => (JSON.parse(l.body) as { type?: string }).type === foreignType,
    );
    if (foreignLetters.length === 0) {
      problems.push(
        `[collision/no-letter] ${key}: the message(s) of ${foreignType} under ${ownType}'s dedupKey were not ` +
          `dead-lettered (item ${item?.status ?? 'absent'})`,
      );
    }
    for (const l of foreignLetters) {
      if (!l.reason.reason || !l.reason.errorClass || !l.reason.errorMessage) {
        problems.push(
          `[collision/no-letter] ${key}: letter of ${foreignType} without its reasons ${JSON.stringify(l.reason)}`,
        );
      }
    }
    return problems;
  }
}

/** What is wrong with one dead letter of job `spec` (nothing, when it carries its reasons). */
function letterProblems(
  reason: DeadLetterReason,
  body: string,
  spec: JobSpec,
  scenario: Scenario,
  where: string,
): string[] {
  const problems: string[] = [];
  if (!reason.reason || !reason.errorClass || !reason.errorMessage) {
    problems.push(`${where}: letter without its reasons ${JSON.stringify(reason)}`);
  }
  // Issue 31 kind `schema`: a refused copy of a job whose payload no longer passes is lettered unclaimed
  // (issue 32: an edited payload the schema refuses too).
  if (refusable(scenario, reason.dedupKey ?? '') && reason.reason === 'invalid-bad-payload') return problems;
  // Issue 34: a copy of a payload an operator's edit replaced (or of the edit, met by the original's job)
  // is lettered unclaimed, with both hashes, the message's its own.
  if (editedAway(scenario, reason)) {
    const payload = (JSON.parse(body) as { payload?: unknown }).payload;
    if (reason.attempts !== 0 || reason.payloadHashes?.message !== payloadHash(payload)) {
      problems.push(`${where}: payload-mismatch letter without its message's hash ${JSON.stringify(reason)}`);
    }
    return problems;
  }
  if (!(reason.attempts >= 1)) problems.push(`${where}: letter with attempts ${reason.attempts}`);
  if (reason.reason === 'max-attempts' && reason.attempts < scenario.maxAttempts) {
    problems.push(
      `${where}: max-attempts letter after ${reason.attempts} of ${scenario.maxAttempts} attempts`,
    );
  }
  // A job past a DynamoDB limit may be dead-lettered under any reason that names it (checked by behaviour).
  if (spec.limit) return problems;
  if (reason.reason === 'permanent-error' && !(spec.poison && reason.errorClass === 'PermanentJobError')) {
    problems.push(`${where}: permanent-error letter (${reason.errorClass}) for a job that never throws one`);
  }
  if (reason.reason !== 'permanent-error' && reason.reason !== 'max-attempts') {
    problems.push(`${where}: unexpected letter reason ${reason.reason} (${reason.errorMessage})`);
  }
  try {
    const parsed = JSON.parse(body) as { dedupKey?: unknown };
    if (parsed.dedupKey !== reason.dedupKey) problems.push(`${where}: letter body is another job's`);
  } catch {
    problems.push(`${where}: letter body is not the original JSON`);
  }
  return problems;
}

/**
 * One named lease's identity in the model's books: its key and its token. A fencing token is strictly
 * increasing per key only (lease-store.ts), so two keys (a job's tenant slot and its cap slot) often
 * carry the same token, held by different workers.
 */
function leaseId(key: string, token: number): string {
  return `${key} ${token}`;
}

/** A `payload-mismatch` letter of a key an operator's redrive edited (issue 34): the only two payloads of a key. */
function editedAway(s: Scenario, reason: DeadLetterReason): boolean {
  return reason.reason === 'payload-mismatch' && editable(s, reason.dedupKey ?? '');
}

/** A letter of a message refused for its payload by issue 31's stricter schema (kind `schema`). */
function refusedPayload(s: Scenario, reason: DeadLetterReason): boolean {
  return reason.reason === 'invalid-bad-payload' && refusable(s, reason.dedupKey ?? '');
}

/** The spec of job `dedupKey` (`job-<index>`). */
function specOf(s: Scenario, dedupKey: string): JobSpec | undefined {
  return s.jobs[Number(dedupKey.replace(/^job-/, ''))];
}

export function jobKey(index: number): string {
  return `job-${index}`;
}

/** How the audit names a fast-path commit. */
const FAST_COMMIT = 'fast commit';

/**
 * An item completed by a fast commit: claimed, completed and its lease ended at the commit's one instant
 * (a leased completion comes after its claim, whose lease ends later).
 */
function oneWrite(item: JobItem): boolean {
  return (
    item.completedAt !== undefined &&
    item.completedAt === item.claimedAt &&
    item.leaseUntil === item.completedAt
  );
}

/** What the types with issue 21's limits carry after `model.` (`model.limited.credit`, `model.fast.limited.slow`). */
const LIMITED = 'limited.';

/** Job types defined with `fastPath: true` start with this. */
const FAST_PREFIX = 'model.fast.';

/** What the model's job types do; each but `steps` has a fast twin (`model.fast.<kind>`). */
const JOB_KINDS = ['credit', 'steps', 'slow', 'flaky', 'poison'] as const;

export function jobType(spec: JobSpec): string {
  const kind: (typeof JOB_KINDS)[number] = spec.poison
    ? 'poison'
    : spec.failRuns > 0
      ? 'flaky'
      : spec.steps.length > 0
        ? 'steps'
        : spec.sleepMs > 0
          ? 'slow'
          : 'credit';
  const limited = spec.tenant === undefined ? '' : LIMITED;
  return spec.fast ? `${FAST_PREFIX}${limited}${kind}` : `model.${limited}${kind}`;
}

/**
 * Counts, per op (`dedupKey#step`, the `lastOp` the credit writes), the effects that committed: the
 * transactions that landed in the schedule's DynamoDB (ModelDb's `committed`), whatever their answer.
 */
class CommittedEffects {
  readonly applied = new Map<string, number>();
  /** The effect lists that committed (the very arrays the workers handed the store). */
  readonly batches = new WeakSet<readonly Effect[]>();
  /** The effect lists handed to the store, by their first effect (a transaction carries their elements). */
  readonly #sent = new WeakMap<Effect, (readonly Effect[])[]>();
  readonly #world: World;

  constructor(world: World) {
    this.#world = world;
  }

  /** `effects` are on their way to the store (so a commit that lands is known by its list). */
  sending(effects: readonly Effect[]): void {
    const first = effects[0];
    if (first === undefined) return;
    const lists = this.#sent.get(first);
    if (lists === undefined) this.#sent.set(first, [effects]);
    else if (!lists.includes(effects)) lists.push(effects);
  }

  /** A transaction landed with `effects` (its actions after the job item's update). */
  committed(effects: readonly Effect[]): void {
    const first = effects[0];
    const list = first === undefined ? undefined : this.#sent.get(first)?.find((l) => sameList(l, effects));
    if (list) this.batches.add(list);
    const world = this.#world;
    let seq: number | undefined;
    for (const effect of effects) {
      const op = (effect.Put?.Item as { lastOp?: unknown } | undefined)?.lastOp;
      if (typeof op === 'string') this.applied.set(op, (this.applied.get(op) ?? 0) + 1);
      // A run of a limited type committed: its interval reaches this commit.
      const run = world.runOfEffect.get(effect);
      if (run) {
        seq ??= ++world.seq;
        run.commit = seq;
        run.commitAt = Date.now();
      }
      // Nothing of a job commits after its cancel was acknowledged.
      const key = typeof op === 'string' ? op.split('#')[0] : undefined;
      const acked = key === undefined ? undefined : world.cancelAcked.get(key);
      if (acked) {
        world.violations.push(
          `[cancel/commit-after-ack] ${op} applied at t=${Date.now() - T0} ms, after ${key}'s cancel was acknowledged (${acked.outcome}) at t=${acked.at - T0} ms`,
        );
      }
    }
  }
}

function sameList(a: readonly Effect[], b: readonly Effect[]): boolean {
  return a.length === b.length && a.every((e, i) => e === b[i]);
}

/** The payload every model job carries: the index of its JobSpec in the scenario. */
interface ModelPayload {
  readonly job: number;
  /** Issue 32: an operator's edited payload (`dlq redrive --payload-file`), which the schema refuses when `bad`. */
  readonly edited?: boolean;
  readonly bad?: boolean;
}

/**
 * The model jobs' schema: any payload passes, but one of a job whose stricter schema is deployed (issue 31
 * kind `schema`, Meet.invalid).
 */
function modelPayload(world: World): PayloadSchema<ModelPayload> {
  return {
    '~standard': {
      version: 1,
      vendor: 'leaseq-model',
      validate: (value) =>
        world.meet.ops.refuses(value as ModelPayload)
          ? { issues: [{ message: 'required by the stricter schema', path: ['sku'] }] }
          : { value: value as ModelPayload },
    },
  };
}

/** One handler for every model job type, leased and fast; what it does comes from its JobSpec. */
function modelRegistry(world: World): JobRegistry {
  const s = world.scenario;
  const limited = s.concurrency !== undefined || s.rate !== undefined;
  const types = [
    ...JOB_KINDS.map((kind) => ({ type: `model.${kind}`, fastPath: false })),
    { type: OTHER_TYPE, fastPath: false },
    ...JOB_KINDS.filter((kind) => kind !== 'steps').map((kind) => ({
      type: `${FAST_PREFIX}${kind}`,
      fastPath: true,
    })),
  ];
  const limitedTypes = limited
    ? types
        .filter(({ type }) => type !== OTHER_TYPE)
        .map(({ type, fastPath }) => ({
          type: fastPath
            ? type.replace(FAST_PREFIX, `${FAST_PREFIX}${LIMITED}`)
            : type.replace('model.', `model.${LIMITED}`),
          fastPath,
        }))
    : [];
  // One limit shared by every limited type (by its name): per tenant, and with `cap` over all of them.
  const tenantOf = (p: ModelPayload) => `t${(s.jobs[p.job] as JobSpec).tenant ?? 'none'}`;
  const concurrency = s.concurrency
    ? [
        { name: 'model.tenant', limit: s.concurrency.perTenant, key: tenantOf },
        ...(s.concurrency.cap === undefined ? [] : [{ name: 'model.cap', limit: s.concurrency.cap }]),
      ]
    : undefined;
  const rateLimit = s.rate
    ? { name: 'model.tenant', limit: s.rate.limit, perSeconds: s.rate.perSeconds, key: tenantOf }
    : undefined;
  const payload = modelPayload(world);
  return JobRegistry.of(
    [
      ...types.map((t) => ({ ...t, limits: false })),
      ...limitedTypes.map((t) => ({ ...t, limits: true })),
    ].map(({ type, fastPath, limits }) =>
      defineJob({
        type,
        payload,
        fastPath,
        tables: { [LEDGER_TABLE.name]: LEDGER_TABLE },
        ...(limits && concurrency ? { concurrency } : {}),
        ...(limits && rateLimit ? { rateLimit } : {}),
        ...(world.scenario.deadKeyTtl === undefined ? {} : { deadKeyTtl: world.scenario.deadKeyTtl }),
        async run(ctx, p: ModelPayload) {
          const spec = world.scenario.jobs[p.job] as JobSpec;
          const key = ctx.dedupKey;
          // Another type's code under this job's dedupKey (review kind `collision`): one credit of its own.
          if (type === OTHER_TYPE) return { effects: [await world.credit(ctx, `${key}#other`, OTHER_OP)] };
          const started = (world.runsStarted.get(key) ?? 0) + 1;
          world.runsStarted.set(key, started);
          const run = world.runStarted(spec, key, ctx.worker);
          // A run the pipeline left behind keeps its slots until it ends (limits.ts): the slot checks
          // need to know which runs are still going.
          const live = `${ctx.worker}/${key}`;
          world.liveRuns.set(live, (world.liveRuns.get(live) ?? 0) + 1);
          try {
            if (spec.block && started <= spec.block.runs) {
              // After one microtask turn, so the pipeline already listens to this run's promise: a block in
              // the very first synchronous section, before the run returns its promise, aborts the job
              // before job-run.ts's `abortable` attaches to it, and the run's later rejection goes
              // unhandled (a crash of a Node worker; reported separately, not modelled here).
              await null;
              // Review kind `blocking`: a synchronous section longer than the lease. Every timer due
              // meanwhile fires at its end, in order, before any answer (a renewal's included) can arrive.
              world.stats.blockedRuns += 1;
              // Every lease in hand may run out meanwhile (the model's workers share one clock, so the block
              // starves them all): that is the job's doing, not a healthy owner aborted.
              world.touchAllInHand();
              world.log('info', 'job blocks the event loop', { worker: ctx.worker, dedupKey: key });
              vi.advanceTimersByTime(Math.round((world.scenario.leaseMs * spec.block.percent) / 100));
            }
            const work = async () => {
              const nap = spec.sleepMs / (spec.steps.length + 1);
              const step = async (op: OpSpec, i: number) => {
                const name = `s${i + 1}`;
                await ctx.step(name, async () => ({
                  effects: [await world.credit(ctx, `${key}#${name}`, op, run)],
                }));
              };
              if (spec.concurrentSteps) {
                // Review kind `concurrent-steps`: both steps at once under the one lease.
                await Promise.all(spec.steps.map(step));
                if (nap > 0) await sleep(nap * spec.steps.length);
              } else {
                for (const [i, op] of spec.steps.entries()) {
                  await step(op, i);
                  if (nap > 0) await sleep(nap);
                }
              }
              if (nap > 0) await sleep(nap);
              const runs = (world.handlerRuns.get(key) ?? 0) + 1;
              world.handlerRuns.set(key, runs);
              const meet = world.meet;
              const lifeRuns = (meet.lifeRuns.get(key) ?? 0) + 1;
              meet.lifeRuns.set(key, lifeRuns);
              const hostile = spec.hostileErrors ? HOSTILE_TEXT : '';
              if (spec.poison) throw new PermanentJobError(`poison pill${hostile}`);
              // Issue 31 kind `redrive`: after a dead-key reset, the new life's first runs fail.
              const failing =
                spec.resetFails !== undefined && meet.lifeOf(key) > 0
                  ? lifeRuns <= spec.resetFails
                  : runs <= spec.failRuns;
              if (failing) throw new TransientJobError(`flaky dependency (run ${runs})${hostile}`);
              const final = await world.credit(ctx, `${key}#final`, spec.final as OpSpec, run);
              return spec.limit
                ? overLimit(key, spec.limit, final, runs)
                : { effects: [final], result: { runs } };
            };
            return await (spec.lease ? world.withNamedLease(ctx, spec, started, work) : work());
          } finally {
            world.liveRuns.set(live, (world.liveRuns.get(live) ?? 1) - 1);
          }
        },
      }),
    ),
  );
}

function traceLogger(world: World): Logger {
  const at = (level: string) => (message: string, extra?: Record<string, unknown>) =>
    world.log(level, message, extra);
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } as unknown as Logger;
}

/** One worker process: a JobProcessor and an event-source loop (receive, processBatch, delete). */
class ModelWorker {
  readonly id: string;
  readonly slot: number;
  readonly generation: number;
  readonly ports: Ports;
  readonly processor: JobProcessor;
  busy = false;
  /** The batch in hand: receive count per message id. */
  batch: ReadonlyMap<string, number> = new Map();
  /** Claims and fast commits sent per message of the batch, when it was received. */
  claimsAtReceive: ReadonlyMap<string, number> = new Map();
  readonly #world: World;

  constructor(world: World, slot: number, generation: number, crash: CrashSpec | undefined) {
    this.#world = world;
    this.slot = slot;
    this.generation = generation;
    this.id = generation === 0 ? `w${slot}` : `w${slot}.${generation}`;
    this.ports = new Ports(world, this, crash);
    const s = world.scenario;
    this.processor = new JobProcessor({
      store: this.ports.store,
      queue: this.ports.queue,
      registry: world.registry,
      worker: this.id,
      logger: world.logger,
      metrics: world.metrics,
      leaseMs: s.leaseMs,
      maxAttempts: s.maxAttempts,
      backoff: { baseSeconds: 1, capSeconds: 8 },
      random: world.rng,
      leases: this.ports.leases,
      rates: this.ports.rates,
      tables: world.model.tables,
      ...(s.cache ? { cache: new CompletedCache() } : {}),
      ...(s.readFirst ? { fastPathReadFirst: true } : {}),
    });
  }

  async loop(): Promise<void> {
    const world = this.#world;
    const s = world.scenario;
    const source = s.source;
    const visibilitySeconds =
      source.kind === 'lambda'
        ? (6 * source.timeoutMs) / 1000
        : source.visibilitySeconds || visibilityForLease(s.leaseMs);
    while (!world.stopped && !this.ports.dead) {
      const received = world.queue.receive(s.batchSize, {
        visibilitySeconds,
        // Issue 31 kind `fifo-limit`: a FIFO queue's order (one group's messages in order, none while
        // one of the group is in flight).
        pick: s.fifo
          ? (visible) => fifoPick(visible, world.queue.messages(), s.batchSize, world.rng)
          : (visible) => shuffle(visible, world.rng),
      });
      const records = s.fifo ? received.map(fifoRecord) : received;
      if (records.length === 0) {
        // A long poll: back when a hidden message shows again (at most 20 s), with some jitter.
        const next = world.queue.nextVisibleAt();
        const wait = next === undefined ? 1000 : Math.min(20_000, Math.max(0, next - Date.now()));
        await sleep(wait + 1 + Math.floor(world.rng() * 500));
        continue;
      }
      this.busy = true;
      this.batch = new Map(records.map((r) => [r.messageId, Number(r.attributes.ApproximateReceiveCount)]));
      this.claimsAtReceive = new Map(
        records.map((r) => [r.messageId, world.claimCalls.get(`${this.id} ${r.messageId}`) ?? 0]),
      );
      world.onReceive(records);
      world.log('debug', 'received', { worker: this.id, messages: records.map((r) => r.messageId) });
      // The handler's deadline: the invocation's timeout less its 3 s margin (shared/worker/handler.ts).
      const deadline = Date.now() + source.timeoutMs - DEADLINE_MARGIN_MS;
      // Lambda kills an invocation at its timeout; the local runner lets the batch finish.
      const kill =
        source.kind === 'lambda'
          ? setTimeout(() => this.ports.kill('timeout', Math.floor(world.rng() * 500)), source.timeoutMs)
          : undefined;
      const { outcomes } = await processBatch(records, this.processor, { deadline });
      clearTimeout(kill);
      for (const [i, outcome] of outcomes.entries()) {
        const record = records[i] as SQSRecord;
        world.onOutcome(this, record, outcome);
        // What the event source does with a batch success.
        if (outcome.disposition === 'delete') {
          await this.ports.queue.delete(record.receiptHandle).catch(() => undefined);
        }
      }
      this.busy = false;
      await sleep(Math.floor(world.rng() * 50));
    }
  }
}

function shuffle<T>(items: T[], rng: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * The store and queue as one worker sees them: every call passes through `call`, which jitters the
 * interleaving, notes calls that failed with an injected fault or took virtual time (the worker was
 * "touched" for that job), and kills the worker at its planned call.
 */
class Ports {
  dead = false;
  calls = 0;
  readonly store: JobStore;
  readonly queue: JobQueue;
  readonly leases: LeaseStore;
  readonly rates: RateStore;
  readonly #world: World;
  readonly #worker: ModelWorker;
  readonly #crash: CrashSpec | undefined;

  constructor(world: World, worker: ModelWorker, crash: CrashSpec | undefined) {
    this.#world = world;
    this.#worker = worker;
    this.#crash = crash;
    this.store = new PortStore(world.workerStore, this);
    this.queue = new PortQueue(world.workerQueue, this, world);
    this.leases = new PortLeases(world.workerLeases, this, world, worker.id);
    this.rates = new PortRates(world.workerRates, this);
  }

  async call<T>(dedupKey: string | undefined, run: () => Promise<T>): Promise<T> {
    if (this.dead) return hang();
    this.calls += 1;
    const crashing = this.#crash !== undefined && this.calls === this.#crash.atCall;
    const started = Date.now();
    if (dedupKey !== undefined) this.#world.callStarted(this.#worker.id, dedupKey, started);
    await this.#stalled();
    await this.#world.jitter();
    if (this.dead) return hang();
    if (crashing && this.#crash?.when === 'before') return this.#die();
    let answer: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      answer = { ok: true, value: await run() };
    } catch (error) {
      answer = { ok: false, error };
    }
    if (dedupKey !== undefined) this.#world.callEnded(this.#worker.id, dedupKey, started);
    const injected = !answer.ok && isInjected(answer.error);
    if ((injected || Date.now() > started) && dedupKey !== undefined) {
      this.#world.touch(this.#worker.id, dedupKey);
    }
    if (crashing || this.dead) return this.#die();
    await this.#stalled();
    await this.#world.jitter();
    if (this.dead) return hang();
    if (!answer.ok) throw answer.error;
    return answer.value;
  }

  /** Waits out a stall of this worker's slot (PauseSpec) that covers the present. */
  async #stalled(): Promise<void> {
    const now = Date.now();
    for (const pause of this.#world.scenario.pauses) {
      const end = pause.atMs + pause.durationMs;
      if (
        pause.slot % this.#world.scenario.workers === this.#worker.slot &&
        pause.atMs <= now - T0 &&
        now - T0 < end
      ) {
        this.#world.stats.stalledCalls += 1;
        await sleep(T0 + end - now);
        return this.#stalled();
      }
    }
  }

  /** Kills the worker now: nothing it has in flight returns. */
  kill(why: string, restartAfterMs: number): void {
    if (this.dead) return;
    this.dead = true;
    this.#world.onDeath(this.#worker, why, restartAfterMs);
  }

  #die(): Promise<never> {
    const crash = this.#crash;
    if (crash) this.kill(`crash at call ${crash.atCall}, ${crash.when} it`, crash.restartAfterMs);
    return hang();
  }
}

/** What an injected fault answers (a 503: the adapters report it as StoreUnavailableError). */
function injectedFault(what: string): Error {
  const error = new Error(`injected fault (${what})`);
  error.name = 'ServiceUnavailable';
  return error;
}

function isInjected(error: unknown): boolean {
  return (
    error instanceof StoreUnavailableError &&
    error.cause instanceof Error &&
    error.cause.message.startsWith('injected')
  );
}

class PortStore implements JobStore {
  readonly #inner: JobStore;
  readonly #ports: Ports;

  constructor(inner: JobStore, ports: Ports) {
    this.#inner = inner;
    this.#ports = ports;
  }

  claim(request: ClaimRequest, options?: StoreCallOptions): Promise<ClaimResult> {
    return this.#ports.call(request.dedupKey, () => this.#inner.claim(request, options));
  }
  claimAndComplete(
    request: FastCommitRequest,
    result: unknown,
    effects?: readonly Effect[],
    options?: StoreCallOptions,
  ): Promise<FastCommitResult> {
    return this.#ports.call(request.dedupKey, () =>
      this.#inner.claimAndComplete(request, result, effects, options),
    );
  }
  renew(lease: JobLease, leaseMs: number, now: number, options?: StoreCallOptions): Promise<void> {
    return this.#ports.call(lease.dedupKey, () => this.#inner.renew(lease, leaseMs, now, options));
  }
  checkpoint(
    lease: JobLease,
    checkpoint: Checkpoint,
    effects?: readonly Effect[],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult> {
    return this.#ports.call(lease.dedupKey, () =>
      this.#inner.checkpoint(lease, checkpoint, effects, options),
    );
  }
  complete(
    lease: JobLease,
    result: unknown,
    effects?: readonly Effect[],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult> {
    return this.#ports.call(lease.dedupKey, () => this.#inner.complete(lease, result, effects, options));
  }
  release(
    lease: JobLease,
    retryAt: number,
    error: { message: string; errorClass: string },
    options?: StoreCallOptions & { refundAttempt?: boolean },
  ): Promise<void> {
    return this.#ports.call(lease.dedupKey, () => this.#inner.release(lease, retryAt, error, options));
  }
  markDead(
    lease: JobLease,
    error: { message: string; errorClass: string },
    options?: StoreCallOptions,
  ): Promise<void> {
    return this.#ports.call(lease.dedupKey, () => this.#inner.markDead(lease, error, options));
  }
  get(dedupKey: string, options?: StoreCallOptions): Promise<JobItem | undefined> {
    return this.#ports.call(dedupKey, () => this.#inner.get(dedupKey, options));
  }
  resetForRedrive(
    dedupKey: string,
    now: number,
    leaseEndedBefore?: number,
    by?: RedriveBy,
    planned?: number,
  ): Promise<boolean> {
    return this.#ports.call(dedupKey, () =>
      this.#inner.resetForRedrive(dedupKey, now, leaseEndedBefore, by, planned),
    );
  }
  cancel(dedupKey: string, request: CancelRequest): Promise<CancelResult> {
    const inner = this.#inner;
    if (!inner.cancel) throw new Error('the model store has no cancel');
    return this.#ports.call(dedupKey, () =>
      (inner.cancel as NonNullable<JobStore['cancel']>)(dedupKey, request),
    );
  }
  recordLeaseLost(lease: JobLease, why: string, now: number, options?: StoreCallOptions): Promise<void> {
    return this.#ports.call(lease.dedupKey, () =>
      this.#inner.recordLeaseLost ? this.#inner.recordLeaseLost(lease, why, now, options) : Promise.resolve(),
    );
  }
  recordDroppedCopy(
    existing: JobItem,
    messageId: string,
    now: number,
    options?: StoreCallOptions,
  ): Promise<void> {
    return this.#ports.call(existing.dedupKey, () =>
      this.#inner.recordDroppedCopy
        ? this.#inner.recordDroppedCopy(existing, messageId, now, options)
        : Promise.resolve(),
    );
  }
}

/**
 * The store the workers' ports call, watching its answers to the writes that carry effects (World.audited,
 * World.completedBy, World.fastCommitSent): a write refused by its fence or by the claim's condition, or
 * answered with an effect conflict, applied none of its effects, one answered ok all of them; a job is
 * answered "completed" at most once; a fast commit comes only from a fast type's first receive.
 */
class AuditStore implements JobStore {
  readonly #inner: JobStore;
  readonly #world: World;

  constructor(inner: JobStore, world: World) {
    this.#inner = inner;
    this.#world = world;
  }

  async claimAndComplete(
    request: FastCommitRequest,
    result: unknown,
    effects: readonly Effect[] = [],
    options?: StoreCallOptions,
  ): Promise<FastCommitResult> {
    const world = this.#world;
    world.fastCommitSent(request);
    world.claimSent(request);
    const what = `${FAST_COMMIT} by ${request.owner}`;
    world.applier.sending(effects);
    let answer: FastCommitResult;
    try {
      answer = await world.protocolWrite(request.dedupKey, () =>
        this.#inner.claimAndComplete(request, result, effects, options),
      );
    } catch (error) {
      if (error instanceof StoreUnavailableError) world.stats.fastUnknown += 1;
      world.limitRefused(request.dedupKey, error);
      throw error;
    }
    world.audited(what, request.dedupKey, effects, answer.ok);
    if (answer.ok) {
      world.stats.fastCommits += 1;
      world.completedBy(request.dedupKey, what);
    } else if (answer.reason === 'refused') world.stats.fastRefused += 1;
    else world.stats.fastConflicts += 1;
    return answer;
  }
  complete(
    lease: JobLease,
    result: unknown,
    effects: readonly Effect[] = [],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult> {
    const what = `complete by ${lease.owner} (token ${lease.token})`;
    return this.#fenced(
      lease,
      what,
      effects,
      () => this.#inner.complete(lease, result, effects, options),
      true,
    );
  }
  checkpoint(
    lease: JobLease,
    checkpoint: Checkpoint,
    effects: readonly Effect[] = [],
    options?: StoreCallOptions,
  ): Promise<FencedWriteResult> {
    const what = `checkpoint ${checkpoint.step} by ${lease.owner} (token ${lease.token})`;
    return this.#fenced(lease, what, effects, () =>
      this.#inner.checkpoint(lease, checkpoint, effects, options),
    );
  }
  async claim(request: ClaimRequest, options?: StoreCallOptions): Promise<ClaimResult> {
    const world = this.#world;
    world.claimSent(request);
    const answer = await world.protocolWrite(request.dedupKey, async () => {
      // Issue 31's books: a claim that took a DEAD key reset it (a new life), whatever its answer.
      const before = world.peek(request.dedupKey);
      let out: ClaimResult | undefined;
      try {
        out = await this.#inner.claim(request, options);
        return out;
      } finally {
        world.meet.claimed(request, before, out);
      }
    });
    if (answer.claimed && answer.wasDeadAt !== undefined) world.resetClaimed(request);
    return answer;
  }
  renew(lease: JobLease, leaseMs: number, now: number, options?: StoreCallOptions): Promise<void> {
    return this.#world.protocolWrite(lease.dedupKey, () => this.#inner.renew(lease, leaseMs, now, options));
  }
  release(
    lease: JobLease,
    retryAt: number,
    error: { message: string; errorClass: string },
    options?: StoreCallOptions & { refundAttempt?: boolean },
  ): Promise<void> {
    const world = this.#world;
    return world
      .protocolWrite(lease.dedupKey, () => this.#inner.release(lease, retryAt, error, options))
      .finally(() =>
        world.meet.released(lease.dedupKey, specOf(world.scenario, lease.dedupKey), error.errorClass),
      );
  }
  markDead(
    lease: JobLease,
    error: { message: string; errorClass: string },
    options?: StoreCallOptions,
  ): Promise<void> {
    const world = this.#world;
    world.markingDead(lease.dedupKey);
    const sentAt = Date.now();
    let answered = false;
    return world.protocolWrite(lease.dedupKey, async () => {
      try {
        await this.#inner.markDead(lease, error, options);
        answered = true;
      } finally {
        // Refused (fenced out) or not applied, another claim's message is the one the job dies under.
        // Landed but answered with an error, or later than the call's budget (one lease), the worker did
        // not learn that it landed and kept the message, which may come back after the dead key's TTL and
        // reset it: a known gap (docs/protocol.md, known gaps), not counted as the message it died under.
        // Either way the item now names this message as the one the job died under, so a message of an
        // earlier death is no longer it: one whose delete failed and that comes back after the dead key's
        // TTL resets the key as a fresh send would (docs/protocol.md, deadKeyTtl).
        const item = world.peek(lease.dedupKey);
        const answeredInTime = answered && Date.now() - sentAt < world.scenario.leaseMs;
        if (item?.status === JobStatus.Dead && item.token === lease.token) {
          if (answeredInTime) world.deadMessages.set(lease.dedupKey, lease.messageId);
          else world.deadMessages.delete(lease.dedupKey);
        }
      }
    });
  }
  recordLeaseLost(lease: JobLease, why: string, now: number, options?: StoreCallOptions): Promise<void> {
    const inner = this.#inner;
    if (!inner.recordLeaseLost) return Promise.resolve();
    return this.#world.historyAppend(
      `lease-lost by ${lease.owner} (token ${lease.token})`,
      lease.dedupKey,
      () => (inner.recordLeaseLost ? inner.recordLeaseLost(lease, why, now, options) : Promise.resolve()),
    );
  }
  recordDroppedCopy(
    existing: JobItem,
    messageId: string,
    now: number,
    options?: StoreCallOptions,
  ): Promise<void> {
    const inner = this.#inner;
    return this.#world.historyAppend(`dropped copy ${messageId}`, existing.dedupKey, () =>
      inner.recordDroppedCopy
        ? inner.recordDroppedCopy(existing, messageId, now, options)
        : Promise.resolve(),
    );
  }
  cancel(dedupKey: string, request: CancelRequest): Promise<CancelResult> {
    const inner = this.#inner;
    if (!inner.cancel) throw new Error('the model store has no cancel');
    return this.#world.protocolWrite(dedupKey, () =>
      (inner.cancel as NonNullable<JobStore['cancel']>)(dedupKey, request),
    );
  }
  get(dedupKey: string, options?: StoreCallOptions): Promise<JobItem | undefined> {
    this.#world.stats.reads += 1;
    return this.#inner.get(dedupKey, options);
  }
  resetForRedrive(
    dedupKey: string,
    now: number,
    leaseEndedBefore?: number,
    by?: RedriveBy,
    planned?: number,
  ): Promise<boolean> {
    return this.#world.protocolWrite(dedupKey, () =>
      this.#inner.resetForRedrive(dedupKey, now, leaseEndedBefore, by, planned),
    );
  }

  /** A fenced write's answer: ok, an effect conflict, or refused by the fence (LeaseLostError). */
  async #fenced(
    lease: JobLease,
    what: string,
    effects: readonly Effect[],
    call: () => Promise<FencedWriteResult>,
    completes = false,
  ): Promise<FencedWriteResult> {
    let answer: FencedWriteResult;
    this.#world.applier.sending(effects);
    try {
      answer = await this.#world.protocolWrite(lease.dedupKey, call);
    } catch (error) {
      if (error instanceof LeaseLostError) this.#world.audited(what, lease.dedupKey, effects, false);
      this.#world.limitRefused(lease.dedupKey, error);
      throw error;
    }
    this.#world.audited(what, lease.dedupKey, effects, answer.ok);
    if (answer.ok && completes) this.#world.completedBy(lease.dedupKey, what);
    return answer;
  }
}

class PortQueue implements JobQueue {
  readonly #inner: JobQueue;
  readonly #ports: Ports;
  readonly #world: World;

  constructor(inner: JobQueue, ports: Ports, world: World) {
    this.#inner = inner;
    this.#ports = ports;
    this.#world = world;
  }

  #key(receiptHandle: string): string | undefined {
    return this.#world.keyOfMessage.get(receiptHandle.split('#')[0] ?? '');
  }
  changeVisibility(receiptHandle: string, seconds: number): Promise<void> {
    return this.#ports.call(this.#key(receiptHandle), () =>
      this.#inner.changeVisibility(receiptHandle, seconds),
    );
  }
  delete(receiptHandle: string): Promise<void> {
    return this.#ports.call(this.#key(receiptHandle), () => this.#inner.delete(receiptHandle));
  }
  sendToDeadLetter(body: string, reason: DeadLetterReason, groupId?: string): Promise<void> {
    return this.#ports.call(reason.dedupKey, () => this.#inner.sendToDeadLetter(body, reason, groupId));
  }
  resend(body: string, options: ResendOptions): Promise<void> {
    const inner = this.#inner;
    if (!inner.resend) throw new Error('the model queue has no resend');
    const key = (JSON.parse(body) as { dedupKey?: string }).dedupKey;
    return this.#ports.call(key, () => (inner.resend as NonNullable<JobQueue['resend']>)(body, options));
  }
}

/**
 * A third of the schedules keep each rate limit on one item, a third split it in 2 shards, a third in as
 * many shards as permits (each a log of one): the rate/over-limit check then holds the shards together
 * to the limit. Where a sharded take starts is drawn from the seed.
 */
function rateSharding(seed: number): {
  rateShards: (limit: number) => number;
  random: () => number;
} {
  const mode = ((seed % 3) + 3) % 3;
  let state = seed >>> 0 || 1;
  return {
    rateShards: (limit) => (mode === 0 ? 1 : mode === 1 ? Math.min(limit, 2) : limit),
    random: () => {
      state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
      return state / 2 ** 32;
    },
  };
}

/** The rate store as one worker sees it: through its ports, noting every grant answered. */
/** `rates` with each grant it answers noted at the take's stamp (a store standing in for the model's). */
function answeredGrants(rates: RateStore, world: World): RateStore {
  return {
    take: async (key, limit, perSeconds, now) => {
      const answer = await rates.take(key, limit, perSeconds, now);
      if (answer.granted) world.rateGranted(key, now);
      return answer;
    },
  };
}

class PortRates implements RateStore {
  readonly #inner: RateStore;
  readonly #ports: Ports;

  constructor(inner: RateStore, ports: Ports) {
    this.#inner = inner;
    this.#ports = ports;
  }

  take(key: string, limit: number, perSeconds: number, now: number): Promise<RateTake> {
    return this.#ports.call(undefined, async () => {
      // Grants are noted by the store itself (World's `rates.onGrant`), with the stamp it logged, when it
      // decides: an answer delayed or lost after the write still counts.
      return this.#inner.take(key, limit, perSeconds, now);
    });
  }
}

/**
 * The named-lease store as one worker sees it: through its ports (so a killed worker's calls hang and a
 * stall holds them), noting which attempt took each lease and catching renewals by ended attempts.
 */
class PortLeases implements LeaseStore {
  readonly #inner: LeaseStore;
  readonly #ports: Ports;
  readonly #world: World;
  readonly #worker: string;

  constructor(inner: LeaseStore, ports: Ports, world: World, worker: string) {
    this.#inner = inner;
    this.#ports = ports;
    this.#world = world;
    this.#worker = worker;
  }

  /** The job of a lease owner (`worker/dedupKey`, jobLeaseOwner; a slot's `worker/dedupKey/messageId`). */
  #key(owner: string): string {
    return owner.split('/')[1] ?? owner;
  }

  async tryAcquire(key: string, owner: string, leaseMs: number, now: number): Promise<AcquireResult> {
    const dedupKey = this.#key(owner);
    if (key.startsWith('slot:')) this.#world.slotKeys.add(key);
    const taken = (token: number, delivered: boolean) => {
      this.#world.acquisitions.set(leaseId(key, token), { worker: this.#worker, dedupKey, delivered });
      if (!delivered) this.#world.stats.namedLeases += 1;
    };
    const result = await this.#ports.call(dedupKey, async () => {
      try {
        const answer = await this.#inner.tryAcquire(key, owner, leaseMs, now);
        if (answer.acquired) taken(answer.lease.token, false);
        return answer;
      } catch (error) {
        // A lost answer: the write may have landed, leaving a lease nobody knows it holds.
        const item = this.#world.model.peekLease(key);
        if (item?.owner === owner && item.acquiredAt === now) taken(item.token, false);
        this.#world.log('trace', `named lease ${key} acquire failed`, {
          worker: this.#worker,
          dedupKey,
          ...(item?.owner === owner && item.acquiredAt === now ? { landed: item.token } : {}),
          error: describeError(error),
        });
        throw error;
      }
    });
    this.#world.log('trace', `named lease ${key} acquire answered`, {
      worker: this.#worker,
      dedupKey,
      ...(result.acquired ? { token: result.lease.token } : { heldBy: result.holder.token }),
    });
    // The answer reached the worker: its attempt knows it holds the lease.
    if (result.acquired)
      this.#world.acquisitions.set(leaseId(key, result.lease.token), {
        worker: this.#worker,
        dedupKey,
        delivered: true,
      });
    return result;
  }
  renew(lease: NamedLease, leaseMs: number, now: number): Promise<void> {
    this.#world.leaseRenewed(this.#worker, this.#key(lease.owner), lease);
    return this.#traced('renew', lease, () =>
      this.#ports.call(this.#key(lease.owner), () => this.#inner.renew(lease, leaseMs, now)),
    );
  }
  release(lease: NamedLease): Promise<void> {
    const id = leaseId(lease.key, lease.token);
    this.#world.releasing.add(id);
    return this.#traced('release', lease, () =>
      this.#ports.call(this.#key(lease.owner), () => this.#inner.release(lease)),
    ).finally(() => this.#world.releasing.delete(id));
  }
  /** Named-lease calls in the run's trace (the job store's own calls show through the worker's logs). */
  async #traced(what: string, lease: NamedLease, call: () => Promise<void>): Promise<void> {
    const extra = { worker: this.#worker, dedupKey: this.#key(lease.owner), token: lease.token };
    try {
      await call();
      this.#world.log('trace', `named lease ${lease.key} ${what} ok`, extra);
    } catch (error) {
      this.#world.log('trace', `named lease ${lease.key} ${what} failed`, {
        ...extra,
        error: describeError(error),
      });
      if (what === 'release' && isInjected(error))
        this.#world.releaseFailed.add(leaseId(lease.key, lease.token));
      throw error;
    }
  }
  get(key: string): Promise<LeaseItem | undefined> {
    return this.#ports.call(undefined, () => this.#inner.get(key));
  }
  getMany(keys: readonly string[]): Promise<LeaseItem[]> {
    const inner = this.#inner;
    return this.#ports.call(undefined, () =>
      inner.getMany
        ? inner.getMany(keys)
        : Promise.all(keys.map((k) => inner.get(k))).then((all) => all.filter((i) => i !== undefined)),
    );
  }
  fence(lease: NamedLease): Effect {
    return this.#inner.fence(lease);
  }
}

/** The names of the named leases model jobs take (two, so jobs contend). */
const LEASE_NAMES = ['lock#0', 'lock#1'] as const;

/** The type of the messages sent under another job's dedupKey (review kind `collision`). */
const OTHER_TYPE = 'model.other';
const OTHER_OP: OpSpec = { account: 'acct-c', delta: 1000 };

/** Text SQS refuses in an attribute: a C0 control and lone surrogates (review kind `dlq-content`). */
const HOSTILE_TEXT = ' \u0000\u0007 \uD800 \uDFFF';

/** What a review-kind `limits` job returns: a completion that breaks one of DynamoDB's limits. */
function overLimit(key: string, limit: NonNullable<JobSpec['limit']>, final: Effect, runs: number) {
  const fill = (i: number): Effect =>
    versionedPut({
      tableName: LEDGER_TABLE.name,
      key: { account: `${key}-fill-${i}` },
      seenVersion: undefined,
      item: { balance: 0, lastOp: `${key}#fill` },
    });
  switch (limit) {
    case 'items':
      // 100 effects and the job item: 101 transaction items.
      return { effects: [final, ...Array.from({ length: 99 }, (_, i) => fill(i))], result: { runs } };
    case 'same-item': {
      const put = final.Put as NonNullable<Effect['Put']>;
      const again: Effect = { Put: { ...put, Item: { ...put.Item, lastOp: `${key}#fill` } } };
      return { effects: [final, again], result: { runs } };
    }
    case 'size': {
      const put = final.Put as NonNullable<Effect['Put']>;
      return {
        effects: [{ Put: { ...put, Item: { ...put.Item, blob: 'x'.repeat(410 * 1024) } } }],
        result: { runs },
      };
    }
    case 'result':
      return { effects: [final], result: { runs, blob: 'x'.repeat(410 * 1024) } };
  }
}

/** The schedule's interruptions of a job's work: faulted calls, crashes, stalls, duplicate sends. */
function interruptions(s: Scenario): number {
  return s.faults.reduce((n, f) => n + f.times, 0) + s.crashes.length + s.pauses.length + s.duplicates.length;
}

/**
 * Receives of one job after which the run counts as looping: every attempt, outage give-back, crash,
 * stall and duplicate may add some, so the bound grows with the schedule's faults; a job whose attempts
 * are refunded forever passes it.
 */
function receiveBound(s: Scenario): number {
  const faultCalls = s.faults.reduce((n, f) => n + f.times, 0);
  return (
    4 * s.maxAttempts +
    2 * faultCalls +
    3 * s.crashes.length +
    3 * s.pauses.length +
    2 * s.duplicates.length +
    // A reset runs a dead key again, with a fresh attempt budget.
    (s.deadKeyTtl === undefined ? 0 : 4 * s.maxAttempts + 4) +
    // So does each redrive (issue 31's operator).
    (s.redrives?.length ?? 0) * (4 * s.maxAttempts + 4) +
    // And each of issue 32's operator actions (a redrive, a fresh send).
    (s.operators?.length ?? 0) * (4 * s.maxAttempts + 4) +
    10
  );
}

/**
 * The review kinds a violation is laid to: its `[kind/check]` tag; else the kinds of the jobs it names
 * (a check the job's kind breaks); else, naming none, every kind in the schedule. Empty: a violation of
 * none of them (the property fails on it whatever is open).
 */
export function violationKinds(scenario: Scenario, violation: string): (ReviewKind | MeetKind)[] {
  const tag = /^\[([a-z-]+)\//.exec(violation)?.[1];
  if (tag && tag !== 'bounded-receives') return [tag as ReviewKind];
  // Issue 31's kinds of a whole schedule (an operator's redrive, a FIFO queue) reach every job in it.
  const whole = meetKindsOf(scenario).filter((k) => k === 'redrive' || k === 'fifo-limit');
  const kindsOfKey = (index: number): (ReviewKind | MeetKind)[] => {
    const spec = scenario.jobs[index];
    const collided = scenario.duplicates.some((d) => d.otherType && d.job % scenario.jobs.length === index);
    if (!spec) return [];
    return [
      ...kindsOf(spec),
      ...(collided ? (['collision'] as const) : []),
      ...(spec.stricterSchema === true ? (['schema'] as const) : []),
      ...(spec.hot ? (['hot-row'] as const) : []),
      ...whole,
    ];
  };
  const keys = [...violation.matchAll(/job-(\d+)/g)].map((m) => Number(m[1]));
  const named = keys.length > 0 ? keys.map(kindsOfKey) : [scenario.jobs.flatMap((_, i) => kindsOfKey(i))];
  if (named.some((k) => k.length === 0)) return [];
  return [...new Set(named.flat())];
}
