import { parseArgs } from 'node:util';
import {
  CI_SCENARIOS,
  CONSUMERS,
  type ConsumerId,
  LIMIT_SCENARIOS,
  LIMITS_ID,
  SCENARIOS,
  type Scenario,
  scenarioById,
} from './scenarios.ts';

/** Settings of one benchmark session, from the command line. */
export interface BenchOptions {
  /** The short CI variant: fewer messages, one repeat, a race and a kill, correctness checks. */
  readonly ci: boolean;
  readonly scenarios: readonly Scenario[];
  /** The opt-in limits variants (`--scenarios limits`), run by the leaseq consumers only; else empty. */
  readonly limits: readonly Scenario[];
  readonly consumers: readonly ConsumerId[];
  readonly repeats: number;
  /** Messages per run, duplicates included. */
  readonly messages: number;
  /** Worker processes of the scenarios that do not fix their own count. */
  readonly workers: number;
  /** Planned kills per run of the kill scenario. */
  readonly kills: number;
  /**
   * The invocation timeout of every batch (what Lambda's function timeout is) and the visibility every
   * receive asks for. Powertools' in-progress expiry and leaseq's lease both end within it.
   */
  readonly timeoutSeconds: number;
  /** Longest one run may take before it is recorded as timed out. */
  readonly runTimeoutSeconds: number;
  /** Directory of the JSON and SVG results; `undefined`: bench/results (full) or a temp folder (CI). */
  readonly out: string | undefined;
  /** Run a small untimed round first (JIT, emulator caches). */
  readonly warmup: boolean;
  /**
   * Run the latency-model scenarios (`aws*`) on the in-memory stores in this process instead of the
   * emulator (in-memory.ts): the round trips are then the model's draws alone.
   */
  readonly inMemory: boolean;
  readonly help: boolean;
}

/** A bad command line: the message is one line, shown without a stack trace. */
export class BenchUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BenchUsageError';
  }
}

export const USAGE = `usage: npm run bench [-- options]      (npm run bench:ci is --ci)
  --ci                    short CI variant: ${CI_SCENARIOS.join(' + ')}, 160 messages, 1 repeat, 2 workers;
                          exits 1 with a one-line reason when a correctness fact fails (never on speed)
  --scenarios a,b         ${SCENARIOS.map((s) => s.id).join(', ')} (default: all; CI: ${CI_SCENARIOS.join(',')});
                          and ${LIMITS_ID} (opt-in: the cost and throughput of concurrency and rate limits,
                          ${LIMIT_SCENARIOS.length} variants, leaseq consumers only; bench/README.md "Limits")
  --consumers a,b         ${CONSUMERS.join(', ')} (default: all, interleaved in this order)
  --repeats N             rounds of every scenario x consumer (default 5; CI 1)
  --messages N            messages per run, duplicates included (default 1000; CI 160)
  --workers N             worker processes where the scenario does not fix them (default 2)
  --kills N               planned kills per kill run (default 3; CI 2)
  --timeout-seconds N     invocation timeout = receive visibility (default 10)
  --run-timeout N         seconds before a run is recorded as timed out (default 300; CI 60)
  --out DIR               where <date>.json and <date>.svg go (default bench/results; CI: a temp folder)
  --no-warmup             skip the untimed warm-up round
  --in-memory             run the latency-model scenarios (aws*) on the in-memory stores, no emulator:
                          bare, leased and fast path, --workers slots each, jobs per slot against the floor
  --help                  this text`;

function integer(
  name: string,
  value: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
    throw new BenchUsageError(
      `--${name} must be an integer from ${min} to ${max}, received ${JSON.stringify(value)}`,
    );
  }
  return n;
}

function list<T extends string>(
  name: string,
  value: string | undefined,
  known: readonly T[],
  fallback: readonly T[],
): T[] {
  if (value === undefined) return [...fallback];
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new BenchUsageError(`--${name} needs at least one of ${known.join(', ')}`);
  for (const item of items) {
    if (!known.includes(item as T)) {
      throw new BenchUsageError(
        `--${name}: unknown ${JSON.stringify(item)}; expected some of ${known.join(', ')}`,
      );
    }
  }
  // Report and interleave in the canonical order, each once.
  return known.filter((k) => items.includes(k));
}

/** Parses the command line. @throws BenchUsageError with a one-line reason. */
export function parseBenchOptions(argv: readonly string[]): BenchOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        ci: { type: 'boolean' },
        scenarios: { type: 'string' },
        consumers: { type: 'string' },
        repeats: { type: 'string' },
        messages: { type: 'string' },
        workers: { type: 'string' },
        kills: { type: 'string' },
        'timeout-seconds': { type: 'string' },
        'run-timeout': { type: 'string' },
        out: { type: 'string' },
        'no-warmup': { type: 'boolean' },
        'in-memory': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    // parseArgs' messages are one line already ("Unknown option '--x'..."); keep the first sentence.
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new BenchUsageError(message ?? 'bad arguments');
  }
  const str = (k: string) => {
    const v = values[k];
    return typeof v === 'string' ? v : undefined;
  };
  const ci = values.ci === true;
  const ids = SCENARIOS.map((s) => s.id);
  const scenarioIds = list('scenarios', str('scenarios'), [...ids, LIMITS_ID], ci ? CI_SCENARIOS : ids);
  const out = str('out');
  if (out !== undefined && out.trim() === '') throw new BenchUsageError('--out needs a directory');
  return {
    ci,
    scenarios: scenarioIds.filter((id) => id !== LIMITS_ID).map((id) => scenarioById(id) as Scenario),
    limits: scenarioIds.includes(LIMITS_ID) ? LIMIT_SCENARIOS : [],
    consumers: list('consumers', str('consumers'), CONSUMERS, CONSUMERS),
    repeats: integer('repeats', str('repeats'), ci ? 1 : 5, 1, 50),
    messages: integer('messages', str('messages'), ci ? 160 : 1000, 20, 100_000),
    workers: integer('workers', str('workers'), 2, 1, 16),
    kills: integer('kills', str('kills'), ci ? 2 : 3, 1, 20),
    timeoutSeconds: integer('timeout-seconds', str('timeout-seconds'), 10, 5, 900),
    runTimeoutSeconds: integer('run-timeout', str('run-timeout'), ci ? 60 : 300, 10, 7200),
    out,
    warmup: values['no-warmup'] !== true && !ci,
    inMemory: values['in-memory'] === true,
    help: values.help === true,
  };
}
