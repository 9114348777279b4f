import fc from 'fast-check';

/*
 * What one schedule of the interleaving model is made of. Everything that varies between runs is in a
 * Scenario, generated (and shrunk) by fast-check; the one `seed` drives the small choices the harness
 * makes while it runs (receive order, poll jitter, microtask yields around every port call, backoff
 * jitter), so a Scenario replays exactly.
 */

export const ACCOUNTS = ['acct-a', 'acct-b', 'acct-c'] as const;

/** One credit a job applies, in a checkpointed step (`step`) or with its completion (`final`). */
export interface OpSpec {
  readonly account: (typeof ACCOUNTS)[number];
  readonly delta: number;
}

export interface JobSpec {
  /** Credits committed each with its own checkpoint (`ctx.step('s1'..)`), before the final one. */
  readonly steps: readonly OpSpec[];
  /** The credit committed with the completion; the poison has none. */
  readonly final?: OpSpec;
  /** Simulated work (virtual ms), split around the steps: above the lease, only heartbeats keep the job. */
  readonly sleepMs: number;
  /** Runs of the handler that throw a retryable error before it succeeds (a flaky dependency). */
  readonly failRuns: number;
  /** Throws PermanentJobError after its steps, every time. */
  readonly poison: boolean;
  /**
   * Defined with `fastPath: true` (a `model.fast.*` type): its first receive runs unclaimed and commits
   * its credit with the completion in one write (`claimAndComplete`); redeliveries run leased. A fast job
   * has no steps (`ctx.step` needs a lease). @default false
   */
  readonly fast?: boolean;
  /** Review kind `named-lease`: the job runs inside `ctx.withLease`. */
  readonly lease?: NamedLeaseSpec;
  /** Review kind `dlq-content`: its errors carry text SQS refuses (C0 controls, lone surrogates). */
  readonly hostileErrors?: boolean;
  /**
   * Review kind `blocking`: its first `runs` runs block the event loop for `percent`% of the job lease in
   * their synchronous section (the virtual clock moves, no renewal answer can arrive meanwhile).
   */
  readonly block?: { readonly runs: number; readonly percent: number };
  /** Review kind `concurrent-steps`: its (two) steps run at once, in `Promise.all`. */
  readonly concurrentSteps?: boolean;
  /**
   * Review kind `limits`: its completion breaks a DynamoDB limit: more than 100 transaction items, two
   * operations on one item, an effect item or the job item (its result) above 400 KB.
   */
  readonly limit?: 'items' | 'same-item' | 'size' | 'result';
  /**
   * Steer kinds `concurrency`/`rate` (issue 21): in a schedule with `concurrency` (or `rate`), the job's
   * tenant (0-2); it then runs as a `model.limited.*` type, whose limits key on the tenant.
   */
  readonly tenant?: number;
  /**
   * Issue 31 kind `redrive`: after a dead-key reset, the first `resetFails` runs of each new life throw a
   * retryable error (the fresh send's job fails once and waits in RETRY_WAIT). Absent: the runs that fail
   * are counted over every life (`failRuns`).
   */
  readonly resetFails?: number;
  /**
   * Issue 31 kind `schema`: a stricter schema is deployed when the job first waits for a retry (`true`);
   * `deploy` (issue 32 kind `deploy`, operators.ts): when the operator deploys it, which refuses the job's
   * payload from then on if it has an item by then.
   */
  readonly stricterSchema?: boolean | 'deploy';
  /** Issue 31 kind `hot-row`: one job of a burst whose every credit goes to one row. */
  readonly hot?: boolean;
  /** Issue 31 kind `fifo-limit`: the job's FIFO message group (`g<n>`); absent: its dedupKey's group. */
  readonly group?: number;
}

/**
 * The kinds of defect review found (issue 18, "keep the promise for every input"), each a job or send
 * feature the schedules mix in, with its own checks in harness.ts (tagged `[kind/check]`).
 */
export const REVIEW_KINDS = [
  'named-lease',
  'collision',
  'dlq-content',
  'blocking',
  'concurrent-steps',
  'limits',
] as const;
export type ReviewKind = (typeof REVIEW_KINDS)[number];

/**
 * A named lease the job takes (`ctx.withLease('lock#<name>')`), shared by the jobs that draw the same
 * name. `acquire` arms a fault on the job's first acquire: `slow` answers after the invocation's deadline
 * (the acquire is in flight when the attempt ends), `lost` lands the write and loses its answer.
 */
export interface NamedLeaseSpec {
  readonly name: number;
  /** @default the library's (15 s) */
  readonly leaseMs?: number;
  /** @default the library's (10 s) */
  readonly waitMs?: number;
  readonly acquire: 'ok' | 'slow' | 'lost';
}

/**
 * Issue 21's kinds (cancel, concurrency limits, rate limits): features of a whole schedule, mixed into a
 * share of the random property's schedules (no focused schedules of their own), each with its checks
 * tagged `[kind/check]`.
 */
export const STEER_KINDS = ['concurrency', 'cancel', 'rate'] as const;
export type SteerKind = (typeof STEER_KINDS)[number];

/**
 * Issue 31's kinds (where features meet, meet-scenario.ts, checks in meet-checks.ts tagged
 * `[kind/check]`): an operator's redrive racing a fresh send after a dead-key reset, a stricter schema
 * while a job waits, FIFO with a limit held for minutes, a hot row under a burst.
 */
export const MEET_KINDS = ['redrive', 'schema', 'fifo-limit', 'hot-row'] as const;
export type MeetKind = (typeof MEET_KINDS)[number];

/**
 * Issue 32's operators in the schedules (operators.ts, operators-scenario.ts; checks tagged `[kind/check]`):
 * the operator's redrive by key and with an edited payload (`redrive` is issue 31's, every letter), the
 * operator's cancel at any point of a job's life, the DLQ purge (whole and by message id), fresh sends
 * around a dead key's TTL, a stricter schema deployed while jobs wait, and limit bounces on a standard or
 * FIFO queue.
 */
export const OPERATOR_KINDS = [
  'redrive-key',
  'redrive-edit',
  'op-cancel',
  'purge',
  'purge-named',
  'fresh-send',
  'deploy',
  'bounce',
] as const;
export type OperatorKind = (typeof OPERATOR_KINDS)[number];

/** The issue 32 kinds a schedule carries. */
export function operatorKindsOf(s: Scenario): OperatorKind[] {
  const kinds = new Set<OperatorKind>();
  for (const o of s.operators ?? []) {
    if (o.act === 'redrive') kinds.add(o.scope === 'key' ? 'redrive-key' : 'redrive-edit');
    else if (o.act === 'cancel') kinds.add('op-cancel');
    else if (o.act === 'purge') kinds.add(o.scope === 'named' ? 'purge-named' : 'purge');
    else if (o.act === 'fresh') kinds.add('fresh-send');
    else kinds.add('deploy');
  }
  if ((s.concurrency || s.rate) && s.jobs.some((j) => j.tenant !== undefined)) kinds.add('bounce');
  return [...kinds];
}

/** The issue 31 kinds a schedule carries. */
export function meetKindsOf(s: Scenario): MeetKind[] {
  const kinds: MeetKind[] = [];
  if ((s.redrives?.length ?? 0) > 0) kinds.push('redrive');
  if (s.jobs.some((j) => j.stricterSchema === true)) kinds.push('schema');
  if (s.fifo) kinds.push('fifo-limit');
  if (s.jobs.some((j) => j.hot)) kinds.push('hot-row');
  return kinds;
}

/** The steer kinds a schedule carries. */
export function steerKindsOf(s: Scenario): SteerKind[] {
  const kinds: SteerKind[] = [];
  const tenants = s.jobs.some((j) => j.tenant !== undefined);
  if (s.concurrency && tenants) kinds.push('concurrency');
  if ((s.cancels?.length ?? 0) > 0) kinds.push('cancel');
  if (s.rate && tenants) kinds.push('rate');
  return kinds;
}

/** The review kinds a job spec carries. */
export function kindsOf(spec: JobSpec): ReviewKind[] {
  const kinds: ReviewKind[] = [];
  if (spec.lease) kinds.push('named-lease');
  if (spec.hostileErrors) kinds.push('dlq-content');
  if (spec.block) kinds.push('blocking');
  if (spec.concurrentSteps) kinds.push('concurrent-steps');
  if (spec.limit) kinds.push('limits');
  return kinds;
}

export type FaultMode = 'fail-before' | 'fail-after' | 'delay-before' | 'delay-after';
/**
 * The store calls faults are armed on. `claim-and-complete` is the fast path's one write; `get` is the read
 * that tells an unknown commit answer (fast or leased) apart. New ones go at the end, so the written-out
 * scenarios of defects.test.ts keep their meaning.
 */
export const STORE_OPS = [
  'claim',
  'renew',
  'checkpoint',
  'complete',
  'release',
  'mark-dead',
  'claim-and-complete',
  'get',
  // On the named-lease store (jobs with `lease`).
  'lease-acquire',
  'lease-renew',
  'lease-release',
  // The history's best-effort appends (docs/protocol.md, "History").
  'record-lease-lost',
  'record-dropped-copy',
  // Issue 21: the slots' batch read, the operator's cancel, the rate permits.
  'lease-get',
  'cancel',
  'rate-take',
] as const;
export const QUEUE_OPS = ['change-visibility', 'delete', 'send-to-dead-letter'] as const;

/**
 * A fault armed at `atMs` (virtual, from the start) on the shared in-memory store or queue through its
 * `StoreFaults`: it hits the next matching call(s) of whichever worker comes first. `fail-after` is a lost
 * answer (the write applied), `delay-*` a slow call (no call carries an abort signal, so it just lasts).
 */
export interface FaultSpec {
  readonly atMs: number;
  readonly target: 'store' | 'queue';
  /** Index into STORE_OPS or QUEUE_OPS (modulo). */
  readonly op: number;
  readonly mode: FaultMode;
  readonly delayMs: number;
  readonly times: number;
}

/**
 * A process kill: worker slot `slot` (modulo the worker count), in its `generation`-th life, dies at its
 * `atCall`-th port call (store or queue), before the call is sent or after it was applied and before its
 * answer arrives. Nothing it has in flight ever returns; it is replaced after `restartAfterMs`.
 */
export interface CrashSpec {
  readonly slot: number;
  readonly atCall: number;
  readonly when: 'before' | 'after';
  readonly restartAfterMs: number;
}

/**
 * A stall of worker slot `slot` (modulo) from `atMs` for `durationMs` (a GC pause, CPU starvation): none
 * of its store or queue calls is sent or answered until the stall ends, heartbeats included.
 */
export interface PauseSpec {
  readonly slot: number;
  readonly atMs: number;
  readonly durationMs: number;
}

/** Another send of job `job` (modulo) at `atMs`: the same body, or a new envelope with the same dedupKey. */
export interface DuplicateSpec {
  readonly job: number;
  readonly atMs: number;
  readonly sameBody: boolean;
  /** Review kind `collision`: a message of another type (`model.other`) under the same dedupKey. */
  readonly otherType?: boolean;
}

/**
 * `lambda`: the production path. Each batch is one invocation with a timeout: the processor gets the
 * handler's deadline (timeout less a 3 s margin, shared/worker/handler.ts), the invocation is killed at
 * the timeout if it has not returned, and the queue's visibility is 6 x the timeout
 * (infra/constructs/job-queue.ts), so every message stays hidden until its batch is over.
 * `poller`: the local runner (shared/runner/worker-loop.ts): same deadline, no kill, and a receive
 * visibility near the lease (`visibilityForLease`, shared/runner/worker-process.ts) or shorter, so a
 * message can come back while the batch that received it still runs. Opt-in (LEASEQ_MODEL_POLLER=1):
 * it reaches the defect reproduced in defects.test.ts.
 */
export type EventSource =
  | { readonly kind: 'lambda'; readonly timeoutMs: number }
  | { readonly kind: 'poller'; readonly timeoutMs: number; readonly visibilitySeconds: number };

export interface Scenario {
  readonly seed: number;
  readonly workers: number;
  readonly leaseMs: number;
  /** How batches reach the workers (see {@link EventSource}). */
  readonly source: EventSource;
  readonly batchSize: number;
  readonly maxAttempts: number;
  /** Workers keep a local completed-cache. */
  readonly cache: boolean;
  /** Workers read the job item before every fast run (JobProcessorOptions.fastPathReadFirst). */
  readonly readFirst?: boolean;
  readonly jobs: readonly JobSpec[];
  readonly duplicates: readonly DuplicateSpec[];
  readonly faults: readonly FaultSpec[];
  readonly crashes: readonly CrashSpec[];
  readonly pauses: readonly PauseSpec[];
  /**
   * The job types' `deadKeyTtl` (seconds, virtual; well inside a run's horizon): a fresh send under a
   * DEAD key after it resets the item and runs. The harness sends one fresh copy of each job that died,
   * just after its TTL. Absent: dead keys stay dead (copies are dropped).
   */
  readonly deadKeyTtl?: number;
  /**
   * Steer kind `concurrency`: the `model.limited.*` types (the jobs with a `tenant`) take one slot of a
   * per-tenant limit (`perTenant`) and, with `cap`, one of a limit shared by all of them.
   */
  readonly concurrency?: { readonly perTenant: number; readonly cap?: number };
  /** Steer kind `rate`: the `model.limited.*` types take a per-tenant permit, `limit` per `perSeconds`. */
  readonly rate?: { readonly limit: number; readonly perSeconds: number };
  /** Steer kind `cancel`: job `job` (modulo) cancelled through the store's `cancel` at `atMs`. */
  readonly cancels?: readonly CancelSpec[];
  /** Issue 31 kind `redrive`: the operator's redrives. */
  readonly redrives?: readonly RedriveSpec[];
  /** Issue 32: the operator's other actions (operators.ts). */
  readonly operators?: readonly OperatorSpec[];
  /**
   * Issue 31 kind `fifo-limit`: the queue is FIFO (groups delivered in order, one message of a group in
   * flight at a time; records carry a SequenceNumber and a `.fifo` source), with the redrive
   * `maxReceiveCount` the pipeline's stack gives it.
   */
  readonly fifo?: boolean;
}

/**
 * Issue 31 kind `redrive`: the operator runs `leaseq dlq redrive` (every letter, the real shared/ops code)
 * `atMs` after the trigger: `at` the start of the run, `wait-after-reset` a reset key's job going back
 * to wait for a retry, `second-death` a reset key dying again. Each fires once.
 */
export interface RedriveSpec {
  readonly on: 'at' | 'wait-after-reset' | 'second-death';
  readonly atMs: number;
}

/**
 * Issue 32: one operator action (operators.ts) about job `job` (modulo), `atMs` after its trigger: `at` the
 * start of the run, `running` the job's first claim, `wait` its first release for a retry, `dead` its
 * first letter. Each fires once (a trigger that never comes fires nothing).
 * - `redrive`: `leaseq dlq redrive --dedup-key` of the job (`key`), or with `--payload-file` (`edit`: a
 *   payload its schema takes; `edit-bad`: one its schema refuses, sent without the schema check);
 * - `cancel`: `leaseq cancel` of the job; `purge`: `leaseq dlq purge` (`all`), or `--message-id` of the
 *   job's letters as the DLQ holds them then (`named`);
 * - `fresh`: a new send of the job (a new envelope, created now), before or after its dead key's TTL;
 * - `deploy`: a stricter schema, refusing the payload of every `stricterSchema: 'deploy'` job with an item.
 */
export interface OperatorSpec {
  readonly act: 'redrive' | 'cancel' | 'purge' | 'fresh' | 'deploy';
  readonly scope?: 'key' | 'edit' | 'edit-bad' | 'all' | 'named';
  readonly job: number;
  readonly on: 'at' | 'running' | 'wait' | 'dead';
  readonly atMs: number;
}

export interface CancelSpec {
  readonly job: number;
  readonly atMs: number;
}

export const op: fc.Arbitrary<OpSpec> = fc.record({
  account: fc.constantFrom(...ACCOUNTS),
  delta: fc.integer({ min: 1, max: 100 }),
});

const sleepMs = fc.oneof(
  { weight: 3, arbitrary: fc.constant(0) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 12_000 }) },
);

/** A job on the fast path has no steps (they need a lease); the others keep theirs. */
const onPath = (spec: JobSpec): JobSpec => (spec.fast ? { ...spec, steps: [] } : spec);

/** About a third of the jobs (and of the poisons) run on the fast path. */
const fast = fc.oneof(
  { weight: 2, arbitrary: fc.constant(false) },
  { weight: 1, arbitrary: fc.constant(true) },
);

export const job: fc.Arbitrary<JobSpec> = fc
  .record({
    steps: fc.array(op, { maxLength: 2 }),
    final: op,
    sleepMs,
    failRuns: fc.oneof(
      { weight: 3, arbitrary: fc.constant(0) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 4 }) },
    ),
    poison: fc.constant(false),
    fast,
  })
  .map(onPath);

const poison: fc.Arbitrary<JobSpec> = fc
  .record({
    steps: fc.array(op, { maxLength: 1 }),
    sleepMs,
    failRuns: fc.constant(0),
    poison: fc.constant(true),
    fast,
  })
  .map(onPath);

const fault: fc.Arbitrary<FaultSpec> = fc.record({
  // A quarter within the first second, when most first receives (the fast path's commits) happen.
  atMs: fc.oneof(
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 1000 }) },
    { weight: 3, arbitrary: fc.integer({ min: 0, max: 40_000 }) },
  ),
  target: fc.constantFrom('store', 'queue'),
  op: fc.nat({ max: STORE_OPS.length - 1 }),
  mode: fc.constantFrom<FaultMode>('fail-before', 'fail-after', 'delay-before', 'delay-after'),
  delayMs: fc.integer({ min: 50, max: 15_000 }),
  times: fc.integer({ min: 1, max: 3 }),
});

const crash: fc.Arbitrary<CrashSpec> = fc.record({
  slot: fc.nat({ max: 2 }),
  atCall: fc.integer({ min: 1, max: 60 }),
  when: fc.constantFrom('before', 'after'),
  restartAfterMs: fc.integer({ min: 0, max: 10_000 }),
});

const pause: fc.Arbitrary<PauseSpec> = fc.record({
  slot: fc.nat({ max: 2 }),
  atMs: fc.integer({ min: 0, max: 30_000 }),
  durationMs: fc.integer({ min: 500, max: 15_000 }),
});

const duplicate: fc.Arbitrary<DuplicateSpec> = fc.record({
  job: fc.nat({ max: 7 }),
  atMs: fc.integer({ min: 0, max: 30_000 }),
  sameBody: fc.boolean(),
  otherType: fc.oneof(
    { weight: 9, arbitrary: fc.constant(false) },
    { weight: 1, arbitrary: fc.constant(true) },
  ),
});

const collision: fc.Arbitrary<DuplicateSpec> = fc.record({
  job: fc.nat({ max: 7 }),
  atMs: fc.integer({ min: 0, max: 30_000 }),
  sameBody: fc.constant(false),
  otherType: fc.constant(true),
});

/** A job of one review kind (a plain job with the kind's feature; `collision` is a send, not a job). */
const reviewJob = (kind: ReviewKind): fc.Arbitrary<JobSpec> => {
  switch (kind) {
    case 'named-lease':
      return fc
        .record({
          base: job,
          lease: fc.record({
            name: fc.nat({ max: 1 }),
            leaseMs: fc.constantFrom(undefined, 4000),
            waitMs: fc.constantFrom(undefined, 2000),
            acquire: fc.constantFrom<NamedLeaseSpec['acquire']>('ok', 'slow', 'lost', 'lost'),
          }),
        })
        .map(({ base, lease }) => ({ ...base, lease }));
    case 'dlq-content':
      return fc
        .record({ base: fc.oneof(job, poison), failRuns: fc.integer({ min: 1, max: 6 }) })
        .map(({ base, failRuns }) => ({
          ...base,
          failRuns: base.poison ? 0 : failRuns,
          hostileErrors: true,
        }));
    case 'blocking':
      return fc
        .record({
          base: job,
          runs: fc.constantFrom(1, 2, 99),
          percent: fc.integer({ min: 120, max: 180 }),
        })
        .map(({ base, runs, percent }) => ({ ...base, block: { runs, percent } }));
    case 'concurrent-steps':
      return fc
        .record({ base: job, steps: fc.array(op, { minLength: 2, maxLength: 2 }) })
        .map(({ base, steps }) => ({ ...base, fast: false, steps, concurrentSteps: true }));
    case 'limits':
      return fc
        .record({ base: job, limit: fc.constantFrom('items', 'same-item', 'size', 'result') })
        .map(({ base, limit }) => ({ ...base, failRuns: 0, limit }));
    case 'collision':
      return job;
  }
};

const anyReviewJob = fc.oneof(
  ...REVIEW_KINDS.filter((k) => k !== 'collision').map((kind) => reviewJob(kind)),
);

const timeoutMs = fc.constantFrom(15_000, 30_000, 60_000);
const lambda: fc.Arbitrary<EventSource> = timeoutMs.map((t) => ({ kind: 'lambda', timeoutMs: t }));
const poller: fc.Arbitrary<EventSource> = fc.record({
  kind: fc.constant('poller'),
  timeoutMs,
  // 0 stands for visibilityForLease(leaseMs), what the local runner asks for.
  visibilitySeconds: fc.constantFrom(0, 1, 2, 5),
});

const cancels = (minLength: number): fc.Arbitrary<CancelSpec[]> =>
  fc.array(
    fc.record({
      job: fc.nat({ max: 9 }),
      // A quarter before most jobs' first run (a tombstone, or a cancel of a job not yet started).
      atMs: fc.oneof(
        { weight: 1, arbitrary: fc.integer({ min: 0, max: 100 }) },
        { weight: 3, arbitrary: fc.integer({ min: 0, max: 30_000 }) },
      ),
    }),
    { minLength, maxLength: 3 },
  );

interface Steer {
  readonly concurrency?: Scenario['concurrency'];
  readonly rate?: Scenario['rate'];
  /** Tenant per job position (undefined: no tenant); cycled over the jobs. */
  readonly tenants: readonly (number | undefined)[];
  /** Extra jobs (a burst of one tenant) in a limited schedule. */
  readonly burst: readonly JobSpec[];
  readonly cancels: readonly CancelSpec[];
}

const NO_STEER: Steer = { tenants: [], burst: [], cancels: [] };

/**
 * Issue 21's share of the schedules: about a third limited (concurrency, a fifth of those also a rate),
 * about a quarter with cancels; independent, so some carry both.
 */
const steerArb = (only?: SteerKind): fc.Arbitrary<Steer> =>
  fc
    .record({
      limited:
        only === 'cancel'
          ? fc.constant(false)
          : only
            ? fc.constant(true)
            : fc.oneof(
                { weight: 2, arbitrary: fc.constant(false) },
                { weight: 1, arbitrary: fc.constant(true) },
              ),
      perTenant: fc.integer({ min: 1, max: 3 }),
      cap: fc.oneof(
        { weight: 2, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: fc.integer({ min: 1, max: 4 }) },
      ),
      concurrencyOn:
        only === 'concurrency'
          ? fc.constant(true)
          : only === 'rate'
            ? fc.constant(false)
            : fc.oneof(
                { weight: 4, arbitrary: fc.constant(true) },
                { weight: 1, arbitrary: fc.constant(false) },
              ),
      rate:
        only === 'concurrency'
          ? fc.constant(undefined)
          : fc.oneof(
              { weight: 3, arbitrary: fc.constant(undefined) },
              {
                weight: 1,
                arbitrary: fc.record({
                  limit: fc.integer({ min: 1, max: 3 }),
                  perSeconds: fc.integer({ min: 1, max: 10 }),
                }),
              },
            ),
      tenants: fc.array(fc.option(fc.nat({ max: 2 }), { freq: 5, nil: undefined }), {
        minLength: 1,
        maxLength: 6,
      }),
      burst: fc.array(job, { maxLength: 4 }),
      burstTenant: fc.nat({ max: 2 }),
      cancels:
        only === 'cancel'
          ? cancels(1)
          : fc.oneof(
              { weight: 3, arbitrary: fc.constant<CancelSpec[]>([]) },
              { weight: 1, arbitrary: cancels(1) },
            ),
    })
    .map((x): Steer => {
      if (!x.limited) return { ...NO_STEER, cancels: x.cancels };
      const rate = x.rate ?? (x.concurrencyOn ? undefined : { limit: 2, perSeconds: 5 });
      return {
        ...(x.concurrencyOn
          ? { concurrency: { perTenant: x.perTenant, ...(x.cap === undefined ? {} : { cap: x.cap }) } }
          : {}),
        ...(rate ? { rate } : {}),
        // The burst's jobs sit at the end of the plain jobs: their tenant is the burst's.
        tenants: x.tenants,
        burst: x.burst.map((j) => ({ ...j, tenant: x.burstTenant })),
        cancels: x.cancels,
      };
    });

/**
 * A schedule: 2-3 workers, 2-6 jobs plus one poison (last), a third of them on the fast path on average,
 * duplicates, faults and crashes; Lambda
 * invocations, or with `pollers` also the local runner's loop.
 */
export const scenarioArb = (
  options: {
    pollers?: boolean;
    kind?: ReviewKind;
    steer?: SteerKind;
    /** Plain jobs and the poison only: no review kind's job, none of issue 21's features (meet-scenario.ts). */
    plain?: boolean;
  } = {},
): fc.Arbitrary<Scenario> => {
  const kind = options.kind;
  // Without a kind, a third of the schedules carry one review-kind job (and a tenth of duplicates are
  // another type's); with one, every schedule has one or two of its jobs (or collisions).
  const review = options.plain
    ? fc.constant<JobSpec[]>([])
    : kind === undefined
      ? fc.oneof(
          { weight: 2, arbitrary: fc.constant<JobSpec[]>([]) },
          { weight: 1, arbitrary: fc.array(anyReviewJob, { minLength: 1, maxLength: 1 }) },
        )
      : kind === 'collision'
        ? fc.constant<JobSpec[]>([])
        : fc.array(reviewJob(kind), { minLength: 1, maxLength: 2 });
  // A focused schedule carries its own kind only (no other type's messages unless it is `collision`).
  const sameType = duplicate.map((d) => ({ ...d, otherType: false }));
  const duplicates =
    kind === undefined
      ? fc.array(duplicate, { maxLength: 4 })
      : kind === 'collision'
        ? fc
            .tuple(fc.array(collision, { minLength: 1, maxLength: 2 }), fc.array(sameType, { maxLength: 2 }))
            .map(([a, b]) => [...a, ...b])
        : fc.array(sameType, { maxLength: 4 });
  return fc
    .record({
      seed: fc.integer(),
      workers: fc.integer({ min: 2, max: 3 }),
      leaseMs: fc.constantFrom(1500, 3000, 6000),
      source: options.pollers ? fc.oneof(lambda, poller) : lambda,
      batchSize: fc.integer({ min: 1, max: 3 }),
      maxAttempts: fc.integer({ min: 3, max: 6 }),
      cache: fc.boolean(),
      readFirst: fc.boolean(),
      jobs: fc.array(job, { minLength: 2, maxLength: 6 }),
      review,
      poison,
      duplicates,
      faults: fc.array(fault, { maxLength: 10 }),
      crashes: fc.array(crash, { maxLength: 3 }),
      pauses: fc.array(pause, { maxLength: 2 }),
      // In a third of the schedules.
      deadKeyTtl: fc.oneof(
        { weight: 2, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: fc.integer({ min: 1, max: 8 }) },
      ),
      // A review kind's focused schedules carry none of issue 21's features; a steer kind's, always its own.
      steer: kind !== undefined || options.plain ? fc.constant(NO_STEER) : steerArb(options.steer),
    })
    .map(({ poison: p, jobs, review: r, steer: st, ...rest }) => {
      // A limited schedule gives most of its plain jobs a tenant, and a burst of one tenant on top.
      const limited = st.concurrency !== undefined || st.rate !== undefined;
      const all = [...jobs, ...(limited ? st.burst : []), ...r, p];
      const tenants = st.tenants;
      const withTenants = limited
        ? all.map((j, i) => {
            const t = tenants[i % tenants.length];
            if (j.poison || kindsOf(j).length > 0 || j.tenant !== undefined || t === undefined) return j;
            return { ...j, tenant: t };
          })
        : all;
      return {
        ...rest,
        jobs: withTenants,
        ...(st.concurrency ? { concurrency: st.concurrency } : {}),
        ...(st.rate ? { rate: st.rate } : {}),
        ...(st.cancels.length > 0 ? { cancels: st.cancels } : {}),
      };
    });
};
