import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';

/** Settings of one chaos run, from flags (then `CHAOS_*` environment variables, then the defaults). */
export interface ChaosOptions {
  readonly jobs: number;
  readonly workers: number;
  readonly fifo: boolean;
  readonly seed: string;
  readonly ci: boolean;
  readonly json: string | undefined;
  readonly leaseMs: number;
  readonly maxAttempts: number;
  readonly timeoutSeconds: number;
  /**
   * How long faults, kills and pauses go on at most; then the run waits, calm, for the jobs left (up to
   * `timeoutSeconds` in all). Liveness means recovery once the faults stop: a slow job can lose every
   * attempt window to faults that never end. CI: 120 s (a typical run is done in 60-100 s); full run:
   * until every job finished.
   */
  readonly chaosSeconds: number;
  /** Delete the run's queues and tables at the end (CI: the emulator must end empty). */
  readonly cleanup: boolean;
  /**
   * Issue 31's input kinds beside the workload (meet.ts): a hot row under a burst, a redrive after a
   * dead-key reset, a stricter schema while a job waits. @default false
   */
  readonly meet: boolean;
  /** Random gaps and lengths of the chaos, in ms. */
  readonly pace: ChaosPace;
}

export interface ChaosPace {
  readonly faultIdle: readonly [number, number];
  readonly faultActive: readonly [number, number];
  readonly killIdle: readonly [number, number];
  readonly pauseIdle: readonly [number, number];
  readonly pauseLength: readonly [number, number];
}

const FULL_PACE: ChaosPace = {
  faultIdle: [3000, 8000],
  faultActive: [1500, 4000],
  killIdle: [6000, 15_000],
  pauseIdle: [20_000, 45_000],
  pauseLength: [2000, 5000],
};

const CI_PACE: ChaosPace = {
  faultIdle: [2000, 5000],
  faultActive: [1500, 3500],
  killIdle: [4000, 9000],
  pauseIdle: [8000, 18_000],
  pauseLength: [2000, 5000],
};

export const USAGE = `usage: tsx chaos/run.ts [--jobs N] [--workers N] [--fifo] [--seed S] [--ci] [--json PATH]
                       [--lease-ms MS] [--max-attempts N] [--timeout SECONDS] [--chaos-seconds S] [--cleanup] [--meet]
  --ci        the short variant: 1000 jobs, 3 workers, a denser chaos schedule
  --seed      makes the workload and the chaos schedule repeatable (default: random, printed)
  --json      where to write the JSON report (default: .leaseq/chaos/<run id>.json)
  --cleanup   delete the run's queues and tables at the end
  --meet      also issue 31's input kinds: a hot row under a burst, a redrive after a dead-key reset, a
              stricter schema while a job waits (chaos/meet.ts)`;

function integer(
  name: string,
  value: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new RangeError(`--${name} must be an integer from ${min} to ${max}, received ${value}`);
  }
  return n;
}

/** Parses the command line. @throws RangeError / TypeError for a bad flag (the caller prints USAGE). */
export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ChaosOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      jobs: { type: 'string' },
      workers: { type: 'string' },
      fifo: { type: 'boolean' },
      seed: { type: 'string' },
      ci: { type: 'boolean' },
      json: { type: 'string' },
      'lease-ms': { type: 'string' },
      'max-attempts': { type: 'string' },
      timeout: { type: 'string' },
      'chaos-seconds': { type: 'string' },
      cleanup: { type: 'boolean' },
      meet: { type: 'boolean' },
    },
    strict: true,
  });
  const ci = values.ci ?? env.CHAOS_CI === '1';
  return {
    ci,
    jobs: integer('jobs', values.jobs ?? env.CHAOS_JOBS, ci ? 1000 : 10_000, 10, 200_000),
    workers: integer('workers', values.workers ?? env.CHAOS_WORKERS, ci ? 3 : 4, 3, 16),
    fifo: values.fifo ?? env.CHAOS_FIFO === '1',
    seed: values.seed ?? env.CHAOS_SEED ?? randomBytes(4).toString('hex'),
    json: values.json ?? env.CHAOS_JSON,
    leaseMs: integer('lease-ms', values['lease-ms'], 3000, 1000, 60_000),
    // The CI variant kills a worker every few seconds: a job slower than its lease can lose ten attempts to
    // kills alone, which is maxAttempts doing its work, not a protocol fault. It gets more room.
    maxAttempts: integer('max-attempts', values['max-attempts'], ci ? 20 : 10, 2, 50),
    // FIFO gets more room: a group's head that waits for a tenant slot holds its place with hides that
    // grow to 30 s (fifoWaitMs, limit-bounce.ts), and its whole group sleeps with it.
    timeoutSeconds: integer(
      'timeout',
      values.timeout ?? env.CHAOS_TIMEOUT,
      ci ? ((values.fifo ?? env.CHAOS_FIFO === '1') ? 300 : 210) : 3600,
      10,
      86_400,
    ),
    chaosSeconds: integer(
      'chaos-seconds',
      values['chaos-seconds'] ?? env.CHAOS_SECONDS,
      ci ? 120 : 86_400,
      10,
      86_400,
    ),
    cleanup: values.cleanup ?? env.CHAOS_CLEANUP === '1',
    meet: values.meet ?? env.CHAOS_MEET === '1',
    pace: ci ? CI_PACE : FULL_PACE,
  };
}
