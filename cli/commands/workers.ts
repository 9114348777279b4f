import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { DEFAULTS } from '../../shared/core/contract/defaults.ts';
import { poolMetricsDir } from '../../shared/ops/smells.ts';
import { DEFAULT_WORKER_TIMEOUT_SECONDS } from '../../shared/resources.ts';
import { WorkerPool } from '../../shared/runner/worker-pool.ts';
import { workerEnv } from '../../shared/worker/config.ts';
import { integerArg, note, renderTable } from '../format.ts';
import { jobModuleOption, requireCliJobs } from '../job-module.ts';
import { safeJson } from '../safe-text.ts';
import { appTableNames, resolveTarget, type TargetFlags, targetOptions } from '../target.ts';

interface WorkersFlags extends TargetFlags {
  readonly count: number;
  readonly leaseMs: number;
  readonly maxAttempts: number;
  readonly json?: boolean;
  readonly jobModule?: string;
  readonly testHooks?: boolean;
  readonly timeout: number;
}

export function register(program: Command): void {
  targetOptions(
    jobModuleOption(program.command('workers'))
      .description(
        'run local worker processes (the Lambda handler under a local SQS event-source loop) until Ctrl-C; ' +
          'SIGTERM/Ctrl-C drains, SIGKILL of a worker is survivable',
      )
      .option('--count <n>', 'worker processes', integerArg(1, 64), 3)
      .option('--lease-ms <ms>', 'job lease', integerArg(1000, 3_600_000), DEFAULTS.leaseMs)
      .option(
        '--max-attempts <n>',
        'attempts before a job is dead-lettered',
        integerArg(1, 100),
        DEFAULTS.maxAttempts,
      )
      .option(
        '--timeout <seconds>',
        "longest run of one batch in seconds, as the Lambda timeout bounds it (the stack's default); every lease ends before it",
        integerArg(1, 900),
        DEFAULT_WORKER_TIMEOUT_SECONDS,
      )
      .option('--test-hooks', 'run test hooks carried in payloads (failure injection; local testing only)')
      .option('--json', 'print the closing per-worker counts as JSON'),
  ).action(async (flags: WorkersFlags) => {
    process.exitCode = await runWorkers(flags);
  });
}

async function runWorkers(flags: WorkersFlags): Promise<number> {
  // `note` escapes (safe-text.ts): a worker's error line can quote a job's text.
  const say = note;
  const { path: jobsModule, jobs } = await requireCliJobs(flags.jobModule);
  const target = await resolveTarget(flags);
  target.close();
  const logDir = join(process.cwd(), '.leaseq', 'logs', `workers-${Date.now().toString(36)}`);
  const pool = new WorkerPool({
    count: flags.count,
    logDir,
    jobsModule,
    // Unique per process, so two pools on one queue never share lease owners, log lines or status rows.
    idPrefix: `${hostname().split('.')[0]}-${process.pid}-w`,
    metricsFile: join(poolMetricsDir(), `workers-${process.pid}.json`),
    invocationTimeoutMs: flags.timeout * 1000,
    env: {
      ...(target.endpoint ? { AWS_ENDPOINT_URL: target.endpoint } : {}),
      // The region the target was chosen in (--region, or the stack outputs' queues), not the shell's.
      AWS_REGION: target.region,
      ...workerEnv({
        ...target.names,
        tables: appTableNames(target.names, jobs),
        leaseMs: flags.leaseMs,
        maxAttempts: flags.maxAttempts,
        testHooks: flags.testHooks ?? false,
      }),
    },
  });
  let stopping = false;
  let restarts = 0;
  let failedStarts = 0;
  let gaveUp: string | undefined;
  const recent: number[] = [];
  let wake = () => {};
  // A worker that dies on its own is replaced, after a pause that doubles with every death in the last
  // minute (0.5 s up to 30 s), so a crash loop does not spin; three deaths in a row before a worker
  // ever polled (a broken job module, a bad setting) end the command instead.
  pool.on('exit', (info) => {
    if (stopping) return;
    const how = info.exitSignal ?? `code ${info.exitCode}`;
    failedStarts = info.ready ? 0 : failedStarts + 1;
    if (failedStarts >= 3) {
      gaveUp = `workers keep dying before they poll (last: ${info.id}, ${how}); see ${info.logFile}`;
      wake();
      return;
    }
    const now = Date.now();
    while (recent.length > 0 && (recent[0] ?? 0) < now - 60_000) recent.shift();
    recent.push(now);
    const delayMs = Math.min(30_000, 500 * 2 ** (recent.length - 1));
    restarts += 1;
    say(
      `worker ${info.id} exited (${how}); starting a replacement in ${delayMs / 1000} s (restarts: ${restarts})`,
    );
    setTimeout(() => {
      if (!stopping) void pool.spawn();
    }, delayMs).unref();
  });
  pool.on('error', (id, message) => say(`worker ${id}: ${message}`));
  await pool.start();
  say(
    `${flags.count} workers running ${jobs.types().join(', ')} from ${queueUrlName(target.names.queueUrl)}; ` +
      `logs in ${logDir}; Ctrl-C drains and stops`,
  );
  const ticker = setInterval(() => {
    say(
      `succeeded ${pool.total('JobSucceeded')} | duplicates ${pool.total('DuplicateSkipped')} | ` +
        `retries ${pool.total('JobRetried')} | dead-lettered ${pool.total('JobDeadLettered')} | ` +
        `alive ${pool.alive}/${flags.count} | restarts ${restarts}`,
    );
  }, 5000);
  await new Promise<void>((resolve) => {
    wake = resolve;
    if (gaveUp) resolve();
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  stopping = true;
  clearInterval(ticker);
  say('draining: in-flight jobs finish or are given back');
  await pool.stop();
  const rows = [...pool.workers.values()].map((w) => ({
    worker: w.id,
    succeeded: w.counters.JobSucceeded ?? 0,
    duplicates: w.counters.DuplicateSkipped ?? 0,
    retries: w.counters.JobRetried ?? 0,
    deadLettered: w.counters.JobDeadLettered ?? 0,
    exit: w.exitSignal ?? String(w.exitCode),
  }));
  if (flags.json) process.stdout.write(`${safeJson(rows, 2)}\n`);
  else {
    const columns = ['worker', 'succeeded', 'duplicates', 'retries', 'dead-lettered', 'exit'].map(
      (header, i) => ({
        header,
        ...(i > 0 && i < 5 ? { align: 'right' as const } : {}),
      }),
    );
    const cells = rows.map((r) =>
      [r.worker, r.succeeded, r.duplicates, r.retries, r.deadLettered, r.exit].map(String),
    );
    process.stdout.write(`${renderTable(columns, cells)}\n`);
  }
  if (gaveUp) say(gaveUp);
  return gaveUp ? 1 : 0;
}

function queueUrlName(url: string): string {
  return url.slice(url.lastIndexOf('/') + 1) || url;
}
