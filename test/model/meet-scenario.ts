import fc from 'fast-check';
import { mixedOperatorsArb } from './operators-scenario.ts';
import { job, type MeetKind, op, type RedriveSpec, type Scenario, scenarioArb } from './scenario.ts';

/*
 * Schedules of issue 31's kinds (scenario.ts MEET_KINDS; what the harness does with them and their checks:
 * meet.ts). `redrive` and `schema` mix into the random property's schedules (faults, crashes, limits and
 * cancels included); `fifo-limit` and `hot-row` need a quiet schedule to mean anything (a slot held for
 * minutes, a burst on one row) and run as focused schedules only.
 */

/** A job that dies in its first life (every run fails) and, after the dead-key reset, fails once or twice more. */
const diesThenWaits = fc
  .record({
    steps: fc.array(op, { maxLength: 1 }),
    final: op,
    sleepMs: fc.constantFrom(0, 0, 2000),
    resetFails: fc.integer({ min: 1, max: 2 }),
  })
  .map(({ steps, final, sleepMs, resetFails }) => ({
    steps,
    final,
    sleepMs,
    failRuns: 99,
    resetFails,
    poison: false,
  }));

const redriveSpec: fc.Arbitrary<RedriveSpec> = fc.oneof(
  fc.record({
    on: fc.constantFrom<RedriveSpec['on']>('wait-after-reset', 'second-death'),
    atMs: fc.integer({ min: 0, max: 3000 }),
  }),
  fc.record({ on: fc.constant<RedriveSpec['on']>('at'), atMs: fc.integer({ min: 0, max: 90_000 }) }),
);

/** Kind `redrive`: a dead-key TTL, a job that dies and waits again after its reset, the operator's redrives. */
const redriveOf = (base: Scenario): fc.Arbitrary<Scenario> =>
  fc
    .record({
      ttl: fc.integer({ min: 1, max: 8 }),
      extra: fc.array(diesThenWaits, { minLength: 1, maxLength: 2 }),
      redrives: fc.array(redriveSpec, { minLength: 1, maxLength: 2 }),
    })
    .map(({ ttl, extra, redrives }) => ({
      ...base,
      deadKeyTtl: ttl,
      // Before the poison (last): the model's written-out checks expect it there.
      jobs: [...base.jobs.slice(0, -1), ...extra, ...base.jobs.slice(-1)],
      redrives,
    }));

/** Kind `schema`: one or two leased jobs that fail at first, whose payload fails a schema deployed meanwhile. */
const schemaOf = (base: Scenario): fc.Arbitrary<Scenario> =>
  fc
    .array(
      fc
        .record({ base: job, failRuns: fc.integer({ min: 1, max: 3 }) })
        .map(({ base: j, failRuns }) => ({ ...j, fast: false, failRuns, stricterSchema: true })),
      { minLength: 1, maxLength: 2 },
    )
    .map((extra) => ({ ...base, jobs: [...base.jobs.slice(0, -1), ...extra, ...base.jobs.slice(-1)] }));

/** A schedule with no fault, crash, stall, duplicate or cancel (the burst's conflicts are the only trouble). */
const quiet = (base: Scenario): Scenario => {
  const { cancels: _cancels, ...rest } = base;
  return { ...rest, faults: [], crashes: [], pauses: [], duplicates: [] };
};

/**
 * Kind `fifo-limit`: a FIFO queue; one tenant with one slot, held for minutes by one long job (a Lambda
 * timeout of 15 minutes), and the tenant's other jobs in other groups behind it, some in one group (whose
 * head's bounces hand the rest back); in some, a rate limit too.
 */
const fifoOf = (base: Scenario): fc.Arbitrary<Scenario> =>
  fc
    .record({
      holdMs: fc.integer({ min: 3 * 60_000, max: 12 * 60_000 }),
      holder: op,
      others: fc.array(
        fc.record({ final: op, group: fc.integer({ min: 1, max: 2 }), failRuns: fc.constantFrom(0, 0, 1) }),
        { minLength: 2, maxLength: 5 },
      ),
      rate: fc.oneof(
        { weight: 3, arbitrary: fc.constant(undefined) },
        {
          weight: 1,
          arbitrary: fc.record({ limit: fc.constant(1), perSeconds: fc.integer({ min: 20, max: 60 }) }),
        },
      ),
    })
    .map(({ holdMs, holder, others, rate }) => ({
      ...quiet(base),
      source: { kind: 'lambda', timeoutMs: 900_000 } as const,
      fifo: true,
      concurrency: { perTenant: 1 },
      ...(rate ? { rate } : {}),
      jobs: [
        { steps: [], final: holder, sleepMs: holdMs, failRuns: 0, poison: false, tenant: 0, group: 0 },
        ...others.map((o) => ({
          steps: [],
          final: o.final,
          sleepMs: 0,
          failRuns: o.failRuns,
          poison: false,
          tenant: 0,
          group: o.group,
        })),
        ...base.jobs.slice(-1),
      ],
    }));

/** Kind `hot-row`: a burst of 8-20 jobs whose every credit goes to one account, few attempts each. */
const hotRowOf = (base: Scenario): fc.Arbitrary<Scenario> =>
  fc
    .record({
      size: fc.integer({ min: 8, max: 20 }),
      fast: fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
      steps: fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
      deltas: fc.array(fc.integer({ min: 1, max: 100 }), { minLength: 20, maxLength: 20 }),
      batchSize: fc.integer({ min: 3, max: 10 }),
      maxAttempts: fc.integer({ min: 2, max: 3 }),
    })
    .map(({ size, fast, steps, deltas, batchSize, maxAttempts }) => ({
      ...quiet(base),
      workers: 3,
      batchSize,
      maxAttempts,
      jobs: [
        ...Array.from({ length: size }, (_, i) => {
          const credit = { account: 'acct-a' as const, delta: deltas[i] ?? 1 };
          const isFast = fast[i] === true;
          return {
            steps: !isFast && steps[i] ? [credit] : [],
            final: credit,
            sleepMs: 0,
            failRuns: 0,
            poison: false,
            fast: isFast,
            hot: true,
          };
        }),
        ...base.jobs.slice(-1),
      ],
    }));

const FEATURE: Record<MeetKind, (base: Scenario) => fc.Arbitrary<Scenario>> = {
  redrive: redriveOf,
  schema: schemaOf,
  'fifo-limit': fifoOf,
  'hot-row': hotRowOf,
};

/** Schedules that all carry issue 31 kind `kind` (focused: no review kind, none of issue 21's features but its own). */
export const meetArb = (kind: MeetKind): fc.Arbitrary<Scenario> =>
  scenarioArb({ plain: true }).chain((base) => FEATURE[kind](base));

/**
 * The random property's schedules: scenario.ts's, and in about one of twelve the features of issue 31's
 * `redrive` or `schema` on top (whatever else the schedule carries), in about one of thirteen issue 32's
 * operators (operators-scenario.ts).
 */
export const mixedArb = (options: { pollers?: boolean } = {}): fc.Arbitrary<Scenario> =>
  fc.oneof(
    { weight: 22, arbitrary: scenarioArb(options) },
    { weight: 1, arbitrary: scenarioArb(options).chain(redriveOf) },
    { weight: 1, arbitrary: scenarioArb(options).chain(schemaOf) },
    { weight: 2, arbitrary: mixedOperatorsArb(options) },
  );
