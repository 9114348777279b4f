import fc from 'fast-check';
import {
  type JobSpec,
  job,
  type OperatorKind,
  type OperatorSpec,
  op,
  type Scenario,
  scenarioArb,
} from './scenario.ts';

/*
 * Schedules of issue 32's operators (scenario.ts OPERATOR_KINDS; what they do and their checks:
 * operators.ts). Each carries a dead-key TTL and one or two jobs that die (every run fails) besides the
 * poison, so there are letters to redrive and purge and dead keys to send anew; the operator's actions are
 * aimed mostly at those. A share of them runs on a FIFO queue. The random property mixes any of the
 * actions into schedules with faults, crashes, limits and cancels (mixedOperatorsArb); each kind also has
 * focused schedules (operatorArb).
 */

/** A job that dies in its first life (every run fails) and, after a dead-key reset, fails once or not. */
const dies: fc.Arbitrary<JobSpec> = fc
  .record({
    steps: fc.array(op, { maxLength: 1 }),
    final: op,
    sleepMs: fc.constantFrom(0, 0, 2000),
    resetFails: fc.integer({ min: 0, max: 1 }),
  })
  .map((j) => ({ ...j, failRuns: 99, poison: false }));

/** A leased job that fails at first (it waits for a retry), whose payload a deployed schema may refuse. */
const deployJob: fc.Arbitrary<JobSpec> = fc
  .record({ base: job, failRuns: fc.integer({ min: 1, max: 3 }) })
  .map(({ base, failRuns }) => ({ ...base, fast: false, failRuns, stricterSchema: 'deploy' as const }));

const trigger = fc.constantFrom<OperatorSpec['on']>('running', 'wait', 'dead', 'dead', 'at');

/** One action of `act` (and `scope`) about one of the schedule's jobs; `dying` picks one that dies. */
const action = (
  act: OperatorSpec['act'],
  scopes: readonly NonNullable<OperatorSpec['scope']>[] = [],
): fc.Arbitrary<OperatorSpec & { readonly dying: boolean }> =>
  fc
    .record({
      scope: scopes.length > 0 ? fc.constantFrom(...scopes) : fc.constant(undefined),
      job: fc.nat({ max: 20 }),
      dying: fc.oneof({ weight: 2, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.boolean() }),
      on:
        act === 'redrive' || act === 'purge' || act === 'fresh'
          ? fc.constantFrom<OperatorSpec['on']>('dead', 'dead', 'wait', 'at')
          : act === 'deploy'
            ? fc.constantFrom<OperatorSpec['on']>('wait', 'wait', 'at')
            : trigger,
      // After a trigger: within a few seconds, or past a dead key's TTL (fresh sends go either side).
      delay: fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 3000, max: 12_000 })),
      at: fc.integer({ min: 0, max: 40_000 }),
    })
    .map(({ scope, job: j, dying, on, delay, at }) => ({
      act,
      ...(scope === undefined ? {} : { scope }),
      job: j,
      dying,
      on,
      atMs: on === 'at' ? at : delay,
    }));

const ACTIONS: Record<Exclude<OperatorKind, 'bounce'>, fc.Arbitrary<OperatorSpec & { dying: boolean }>> = {
  'redrive-key': action('redrive', ['key']),
  'redrive-edit': action('redrive', ['edit', 'edit', 'edit-bad']),
  'op-cancel': action('cancel'),
  purge: action('purge', ['all']),
  'purge-named': action('purge', ['named']),
  'fresh-send': action('fresh'),
  deploy: action('deploy'),
};

const anyAction = fc.oneof(...Object.values(ACTIONS));

/**
 * `base` with the operators' jobs (dying ones, `deploy` ones for a deploy) before its poison, a dead-key
 * TTL, and `actions` aimed at its jobs (a `dying` one at a job that dies, a deploy at a `deploy` job).
 */
const withOperators = (
  base: Scenario,
  actions: fc.Arbitrary<(OperatorSpec & { dying: boolean })[]>,
  fifo: fc.Arbitrary<boolean>,
): fc.Arbitrary<Scenario> =>
  fc
    .record({
      ttl: fc.integer({ min: 1, max: 8 }),
      extra: fc.array(dies, { minLength: 1, maxLength: 2 }),
      deploys: fc.array(deployJob, { minLength: 1, maxLength: 2 }),
      actions,
      fifo,
    })
    .map(({ ttl, extra, deploys, actions: acts, fifo: onFifo }) => {
      const plain = base.jobs.slice(0, -1);
      const deploying = acts.some((a) => a.act === 'deploy');
      const jobs = [...plain, ...extra, ...(deploying ? deploys : []), ...base.jobs.slice(-1)];
      // The jobs that die: the extra ones and the poison (last).
      const dying = [...extra.map((_, i) => plain.length + i), jobs.length - 1];
      const deployed = deploying ? deploys.map((_, i) => plain.length + extra.length + i) : [];
      const operators = acts.map(({ dying: aimed, ...a }): OperatorSpec => {
        const pool = a.act === 'deploy' ? deployed : aimed ? dying : undefined;
        return { ...a, job: pool ? (pool[a.job % pool.length] as number) : a.job % jobs.length };
      });
      return { ...base, deadKeyTtl: ttl, jobs, operators, ...(onFifo ? { fifo: true } : {}) };
    });

/** About a quarter of the operators' schedules run on a FIFO queue. */
const someFifo = fc.oneof(
  { weight: 3, arbitrary: fc.constant(false) },
  { weight: 1, arbitrary: fc.constant(true) },
);

/**
 * Kind `bounce`: a limited schedule (a tenant's slot of one, in a third a rate of one per 5-40 s too), on a
 * standard or FIFO queue, one job holding its tenant's slot for one to three minutes, with the operators'
 * actions besides.
 */
const bounceOf = (base: Scenario): fc.Arbitrary<Scenario> =>
  fc
    .record({
      holdMs: fc.integer({ min: 60_000, max: 180_000 }),
      fifo: fc.boolean(),
      groups: fc.array(fc.option(fc.nat({ max: 1 }), { nil: undefined }), { minLength: 12, maxLength: 12 }),
      rate: fc.oneof(
        { weight: 2, arbitrary: fc.constant(undefined) },
        {
          weight: 1,
          arbitrary: fc.record({ limit: fc.constant(1), perSeconds: fc.integer({ min: 5, max: 40 }) }),
        },
      ),
    })
    .chain(({ holdMs, fifo, groups, rate }) => {
      const tenant = base.jobs.find((j) => j.tenant !== undefined)?.tenant ?? 0;
      const jobs = base.jobs.map((j, i) => ({
        ...j,
        ...(i === 0 ? { sleepMs: holdMs, tenant, fast: false, steps: [] } : {}),
        ...(fifo && groups[i] !== undefined ? { group: groups[i] } : {}),
      }));
      const limited: Scenario = {
        ...base,
        jobs,
        source: { kind: 'lambda', timeoutMs: 900_000 },
        concurrency: { perTenant: 1 },
        ...(rate ? { rate } : {}),
      };
      return withOperators(limited, fc.array(anyAction, { maxLength: 2 }), fc.constant(fifo));
    });

/** Schedules that all carry issue 32 kind `kind` (focused: no review kind, issue 21's features for `bounce` only). */
export const operatorArb = (kind: OperatorKind): fc.Arbitrary<Scenario> =>
  kind === 'bounce'
    ? scenarioArb({ plain: false, kind: undefined, steer: 'concurrency' }).chain(bounceOf)
    : scenarioArb({ plain: true }).chain((base) =>
        withOperators(base, fc.array(ACTIONS[kind], { minLength: 1, maxLength: 2 }), someFifo),
      );

/** The random property's share: one to four actions of any kind on a schedule with whatever it carries. */
export const mixedOperatorsArb = (options: { pollers?: boolean } = {}): fc.Arbitrary<Scenario> =>
  scenarioArb(options).chain((base) =>
    withOperators(base, fc.array(anyAction, { minLength: 1, maxLength: 4 }), someFifo),
  );
