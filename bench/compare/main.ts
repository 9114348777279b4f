// `npm run bench`: leaseq side by side with a bare consumer and Powertools idempotency, on the embedded
// emulator (or AWS_ENDPOINT_URL). Same workload, same worker count, same poll loop; only the consumer
// differs. Runs interleave (a b c d a b c d ...); the table gives medians with min-max and in-run ratios.
// `npm run bench:ci` is the short variant, which checks correctness facts and never speed.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { awsConfigFromEnv, createAwsClients, destroyAwsClients } from '../../shared/aws/clients.ts';
import { ensureEmulator } from '../../shared/local/emulator.ts';
import { type ColdStart, coldStart, coldStartText } from '../cold-start.ts';
import { percentile } from '../report.ts';
import { chartSvg } from './chart.ts';
import { correctnessProblems, type RunError } from './checks.ts';
import { Fleet } from './fleet.ts';
import { type Leftovers, removeLeftovers } from './leftovers.ts';
import { limitsText, summarizeLimits } from './limits-table.ts';
import { type BenchOptions, BenchUsageError, parseBenchOptions, USAGE } from './options.ts';
import { PRICES } from './pricing.ts';
import { type RunResult, runOnce } from './run.ts';
import { LIMIT_CONSUMERS, type Scenario, scenarioById, workersFor } from './scenarios.ts';
import { checkTargets, summarize } from './summary.ts';
import { reportText } from './table.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function packageVersion(name: string): string {
  try {
    return (
      JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as {
        version: string;
      }
    ).version;
  } catch {
    return 'unknown';
  }
}

function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

/** A run's JSON form: everything but the per-job latencies, which become percentiles. */
function jsonRun(run: RunResult) {
  const { latencyMs, ...rest } = run;
  return {
    ...rest,
    latency: {
      n: latencyMs.length,
      p50: percentile(latencyMs, 50),
      p90: percentile(latencyMs, 90),
      p95: percentile(latencyMs, 95),
      p99: percentile(latencyMs, 99),
      max: latencyMs.length > 0 ? Math.max(...latencyMs) : null,
    },
  };
}

async function main(options: BenchOptions): Promise<number> {
  const started = Date.now();
  const loadAtStart = loadavg();
  const say = (line: string) =>
    process.stderr.write(`bench +${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s ${line}\n`);
  if (options.inMemory) return (await import('./in-memory.ts')).inMemoryReport(options, say);
  const emulator = await ensureEmulator({ log: say });
  const endpoint = emulator.endpoint;
  const config = { ...awsConfigFromEnv(), endpoint };
  const control = createAwsClients(config);
  const session = `lqb${Date.now().toString(36)}`;
  const scratch = join(ROOT, '.leaseq', 'bench', session);
  const fleet = new Fleet(join(scratch, 'logs'));
  let interrupted = false;
  process.on('SIGINT', () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    say('interrupted: stopping after the run in flight (Ctrl-C again to quit at once)');
  });
  const results: RunResult[] = [];
  const errors: RunError[] = [];
  let leftovers: Leftovers = { queues: [], tables: [] };
  try {
    const maxWorkers = Math.max(
      ...[...options.scenarios, ...options.limits].map((s) => workersFor(s, options.workers)),
    );
    say(
      `${emulator.emulator ?? emulator.mode} at ${endpoint}; session ${session}; starting ${maxWorkers} worker processes`,
    );
    await fleet.ensure(maxWorkers);
    const common = {
      messages: options.messages,
      kills: options.kills,
      timeoutSeconds: options.timeoutSeconds,
      runTimeoutSeconds: options.runTimeoutSeconds,
      session,
      endpoint,
      region: config.region,
      control,
      fleet,
      scratchDir: scratch,
    };
    if (options.warmup) {
      const warm = scenarioById('dup10');
      for (const consumer of options.consumers) {
        if (!warm) break;
        await runOnce(
          { ...common, consumer, scenario: warm, repeat: -1, workers: options.workers, messages: 200 },
          say,
        );
      }
      say('warm-up done (not recorded)');
    }
    // Every round: each scenario x consumer, then the limits variants for the leaseq consumers.
    const cells: { scenario: Scenario; consumer: (typeof options.consumers)[number] }[] = [
      ...options.scenarios.flatMap((scenario) =>
        options.consumers.map((consumer) => ({ scenario, consumer })),
      ),
      ...options.limits.flatMap((scenario) =>
        options.consumers
          .filter((c) => LIMIT_CONSUMERS.includes(c))
          .map((consumer) => ({ scenario, consumer })),
      ),
    ];
    const total = options.repeats * cells.length;
    let done = 0;
    let failuresInARow = 0;
    outer: for (let repeat = 0; repeat < options.repeats; repeat++) {
      for (const { scenario, consumer } of cells) {
        if (interrupted) break outer;
        done += 1;
        const workers = workersFor(scenario, options.workers);
        const t = Date.now();
        try {
          const r = await runOnce({ ...common, consumer, scenario, repeat, workers }, say);
          results.push(r);
          failuresInARow = 0;
          say(
            `[${done}/${total}] round ${repeat + 1} ${scenario.id} ${consumer}: ${r.jobsPerSecond.toFixed(0)} jobs/s, ` +
              `p50 ${percentile(r.latencyMs, 50).toFixed(0)} ms, doubles ${r.effects.doubles}, missing ${r.effects.missing}` +
              `${r.kills.planned ? `, kills ${r.kills.happened}/${r.kills.planned}` : ''}${r.timedOut ? ', TIMED OUT' : ''} ` +
              `${r.groups ? `(A ${r.groups.A?.jobsPerSecond.toFixed(1)}, B ${r.groups.B?.jobsPerSecond.toFixed(1)} jobs/s, waits ${r.stats.LimitWait ?? 0}) ` : ''}` +
              `(${((Date.now() - t) / 1000).toFixed(1)} s)`,
          );
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          errors.push({ consumer, scenario: scenario.id, repeat, message });
          say(`[${done}/${total}] round ${repeat + 1} ${scenario.id} ${consumer}: FAILED: ${message}`);
          if (++failuresInARow >= 3) throw new Error(`three runs in a row failed; the last: ${message}`);
        }
      }
    }
  } finally {
    await fleet.close();
    leftovers = await removeLeftovers(control, session).catch(() => leftovers);
    destroyAwsClients(control);
  }

  const scenarioIds = options.scenarios.map((s) => s.id);
  const summaries = summarize(results, scenarioIds, options.consumers);
  const limitSummaries = summarizeLimits(
    results,
    options.limits.map((s) => s.id),
    options.consumers,
  );
  const targets = checkTargets(summaries);
  const date = new Date(started).toISOString().slice(0, 10);
  const facts = {
    date,
    emulator: `${emulator.emulator ?? 'endpoint'}${emulator.version ? ` ${emulator.version}` : ''} at ${endpoint}`,
    node: process.version,
    cpus: cpus().length,
    messages: options.messages,
    repeats: options.repeats,
    timeoutSeconds: options.timeoutSeconds,
  };
  // Cold start: the worker bundle's size and init time (not in the CI variant, which checks facts only).
  let cold: ColdStart | undefined;
  if (!options.ci) {
    say('measuring the worker bundle and its cold init');
    cold = await coldStart().catch((error: unknown) => {
      say(`cold start not measured: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    });
    if (cold) {
      targets.push({
        target: `cold init <= ${cold.targetInitMs} ms (fresh Node process on this machine)`,
        measured: `${cold.initMs.median.toFixed(0)} ms (CPU ${cold.initCpuMs.median.toFixed(0)} ms)`,
        met: cold.initMs.median <= cold.targetInitMs,
      });
      targets.push({
        target: 'nothing of the tracing SDK evaluated at init without OTEL_* set',
        measured: cold.tracingAtInit.length === 0 ? 'nothing' : cold.tracingAtInit.join(', '),
        met: cold.tracingAtInit.length === 0,
      });
    }
  }
  const text =
    `${options.scenarios.length > 0 ? reportText(summaries, targets, facts) : ''}` +
    `${limitsText(limitSummaries, { messages: options.messages, workers: options.workers })}` +
    `${cold ? `${coldStartText(cold)}\n` : ''}`;
  process.stdout.write(text);

  const problems = correctnessProblems(results, errors, leftovers);
  const outDir =
    options.out ?? (options.ci ? join(tmpdir(), 'leaseq-bench') : join(ROOT, 'bench', 'results'));
  mkdirSync(outDir, { recursive: true });
  const base = options.ci ? `ci-${session}` : date;
  const jsonPath = join(outDir, `${base}.json`);
  const svgPath = join(outDir, `${base}.svg`);
  const textPath = join(outDir, `${base}.txt`);
  const document = {
    benchmark: 'leaseq side-by-side (bench/compare)',
    variant: options.ci ? 'ci' : 'full',
    date,
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    interrupted,
    options: {
      ...options,
      scenarios: options.scenarios.map((s) => s.id),
      limits: options.limits.map((s) => s.id),
    },
    scenarios: [...options.scenarios, ...options.limits],
    method: {
      throughput: 'messages done (deleted) per second, from the first send to the last message done',
      latency:
        "first send of a job to the return of the first write that applied its effect (the worker's clock)",
      perJob: 'per unique job',
      backlog: 'the producer keeps at most 20 x (workers + 1) messages outstanding',
      capacity:
        "ReturnConsumedCapacity=TOTAL on every worker DynamoDB request, as the emulator reports it (MiniStack sizes items by DynamoDB's rules); refused conditional writes report none and are computed: 1 WRU per started KB of the item as it was (ALL_OLD), at least 1, 2x per item of a cancelled transaction",
      requests: 'SDK middleware (shared/aws/request-counter.ts) on the worker clients only',
    },
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      platform: `${process.platform} ${process.arch}`,
      node: process.version,
      loadAverage: { start: loadAtStart, end: loadavg() },
    },
    versions: {
      leaseqCommit: gitCommit(),
      emulator: facts.emulator,
      powertoolsIdempotency: packageVersion('@aws-lambda-powertools/idempotency'),
      powertoolsBatch: packageVersion('@aws-lambda-powertools/batch'),
      awsSdkClientDynamodb: packageVersion('@aws-sdk/client-dynamodb'),
      awsSdkClientSqs: packageVersion('@aws-sdk/client-sqs'),
    },
    prices: PRICES,
    coldStart: cold,
    targets,
    problems,
    errors,
    leftovers,
    summaries,
    limits: limitSummaries,
    runs: results.map(jsonRun),
  };
  writeFileSync(jsonPath, `${JSON.stringify(document, null, 2)}\n`);
  const consumersShown = options.consumers.length;
  // The chart shows the side-by-side scenarios; a limits-only session has none to draw.
  const chart = summaries.length > 0;
  if (chart) {
    writeFileSync(
      svgPath,
      chartSvg(
        summaries,
        `leaseq side-by-side benchmark, ${date} (${facts.emulator.split(' at ')[0]}, ${facts.cpus} cores)`,
        `Bars: median of ${options.repeats} run${options.repeats === 1 ? '' : 's'} per cell (${consumersShown} consumers interleaved); ` +
          `whiskers: min-max; ${options.messages} messages per run; details in ${base}.json.`,
      ),
    );
  }
  writeFileSync(textPath, text);
  say(`results: ${jsonPath}, ${chart ? `${svgPath} and ` : ''}${textPath}`);
  if (problems.length > 0) {
    say(`worker logs kept in ${scratch}`);
    process.stderr.write(
      `bench${options.ci ? ':ci' : ''}: FAIL: ${problems[0]}${problems.length > 1 ? ` (and ${problems.length - 1} more problems, listed in ${jsonPath})` : ''}\n`,
    );
    return 1;
  }
  // The worker logs (leaseq logs every job at INFO) are only worth keeping when something went wrong.
  rmSync(scratch, { recursive: true, force: true });
  if (interrupted) return 130;
  say(`done in ${((Date.now() - started) / 1000).toFixed(0)} s; correctness facts hold`);
  return 0;
}

let options: BenchOptions;
try {
  options = parseBenchOptions(process.argv.slice(2));
} catch (error) {
  const message = error instanceof BenchUsageError ? error.message : String(error);
  process.stderr.write(`bench: ${message} (npm run bench -- --help lists the options)\n`);
  process.exit(2);
}
if (options.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
main(options).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench: failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
