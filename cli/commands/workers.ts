import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { isLocalEndpoint } from '../../shared/aws/clients.ts';
import { DEFAULTS } from '../../shared/core/contract/defaults.ts';
import { DEFAULT_MAX_BODY_BYTES } from '../../shared/core/contract/envelope.ts';
import { holdEmulator } from '../../shared/local/emulator.ts';
import { poolMetricsDir } from '../../shared/ops/smells.ts';
import { DEFAULT_WORKER_TIMEOUT_SECONDS, WORKER_ENV } from '../../shared/resources.ts';
import { RestartPolicy } from '../../shared/runner/restart-policy.ts';
import { WorkerPool } from '../../shared/runner/worker-pool.ts';
import {
  checkInvocationTimeout,
  type WorkerSettings,
  workerEnv,
  workerSettingsFromEnv,
} from '../../shared/worker/config.ts';
import { integerArg, note, renderTable } from '../format.ts';
import { jobModuleOption, requireCliJobs } from '../job-module.ts';
import { safeJson } from '../safe-text.ts';
import { appTableNames, resolveTarget, type TargetFlags, targetOptions } from '../target.ts';

interface WorkersFlags extends TargetFlags {
  readonly count: number;
  /** Left as given: the worker settings' own parser reads it, as it reads LEASEQ_LEASE_MS. */
  readonly leaseMs?: string;
  readonly maxAttempts?: string;
  readonly maxBodyBytes?: string;
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
      // No defaults here: a default would override the variable (flag > LEASEQ_* variable > default).
      .option('--lease-ms <ms>', `job lease (default: ${WORKER_ENV.leaseMs}, else ${DEFAULTS.leaseMs})`)
      .option(
        '--max-attempts <n>',
        `attempts before a job is dead-lettered (default: ${WORKER_ENV.maxAttempts}, else ${DEFAULTS.maxAttempts})`,
      )
      .option(
        '--max-body-bytes <n>',
        `largest message body run, as the jobs queue's MaximumMessageSize (default: ${WORKER_ENV.maxBodyBytes}, else ${DEFAULT_MAX_BODY_BYTES})`,
      )
      .option(
        '--timeout <seconds>',
        "longest run of one batch in seconds, as the Lambda timeout bounds it (the stack's default); every lease ends before it",
        integerArg(1, 900),
        DEFAULT_WORKER_TIMEOUT_SECONDS,
      )
      .option('--test-hooks', 'run test hooks carried in payloads (failure injection; local testing only)')
      .option('--json', 'print the closing per-worker counts as JSON')
      .addHelpText(
        'after',
        '\nSettings: flag > LEASEQ_* variable > default. The workers read the other LEASEQ_* worker ' +
          'variables (README "Worker settings") as a Lambda does, and accept the same values.\n' +
          'Stopping: Ctrl-C or SIGTERM stops polling; jobs in flight finish or, at their --timeout ' +
          'deadline, are given back; workers still running --timeout plus 15 s later are killed. ' +
          'A second Ctrl-C or SIGTERM kills them at once.',
      ),
  ).action(async (flags: WorkersFlags) => {
    process.exitCode = await runWorkers(flags);
  });
}

/** The worker settings in force: a flag given, else the LEASEQ_* variable, else the default. */
function settingsOf(flags: WorkersFlags): WorkerSettings {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // The command decides these itself: hooks only with --test-hooks (a LEASEQ_TEST_HOOKS left in the
  // shell never switches them on), and one id per worker.
  delete env[WORKER_ENV.testHooks];
  delete env[WORKER_ENV.workerId];
  const labels: Record<string, string> = {};
  for (const [key, option] of [
    ['leaseMs', '--lease-ms'],
    ['maxAttempts', '--max-attempts'],
    ['maxBodyBytes', '--max-body-bytes'],
  ] as const) {
    const given = flags[key];
    if (given === undefined) continue;
    env[WORKER_ENV[key]] = given;
    labels[key] = option;
  }
  const settings = workerSettingsFromEnv(env, labels);
  checkInvocationTimeout(flags.timeout, settings, '--timeout');
  return settings;
}

/** Margin after a batch's --timeout for its release or commit and the message's give-back. */
const STOP_MARGIN_MS = 15_000;

async function runWorkers(flags: WorkersFlags): Promise<number> {
  // `note` escapes (safe-text.ts): a worker's error line can quote a job's text.
  const say = note;
  // Before anything else: a bad setting is one line and no worker starts.
  const settings = settingsOf(flags);
  const { path: jobsModule, jobs } = await requireCliJobs(flags.jobModule);
  const target = await resolveTarget(flags);
  target.close();
  // Workers on the embedded emulator hold it, so a deploy does not restart it under them.
  if (target.endpoint && isLocalEndpoint(target.endpoint)) process.once('exit', await holdEmulator());
  const logDir = join(process.cwd(), '.leaseq', 'logs', `workers-${Date.now().toString(36)}`);
  // Signals are ours from before the first fork: a stop at any moment, also while the workers start,
  // goes through pool.stop(), so no worker outlives the command.
  let signals = 0;
  let stopRequested = () => {};
  let killNow = () => {};
  const stopAsked = new Promise<void>((resolve) => {
    stopRequested = resolve;
  });
  const onSignal = () => {
    signals += 1;
    if (signals === 1) stopRequested();
    else killNow();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const pool = new WorkerPool({
    count: flags.count,
    logDir,
    jobsModule,
    // Unique per process, so two pools on one queue never share lease owners, log lines or status rows.
    idPrefix: `${hostname().split('.')[0]}-${process.pid}-w`,
    metricsFile: join(poolMetricsDir(), `workers-${process.pid}.json`),
    metricsTarget: { endpoint: target.endpoint ?? null, queueArn: target.names.queueArn },
    invocationTimeoutMs: flags.timeout * 1000,
    env: {
      ...(target.endpoint ? { AWS_ENDPOINT_URL: target.endpoint } : {}),
      // The region the target was chosen in (--region, or the stack outputs' queues), not the shell's.
      AWS_REGION: target.region,
      ...workerEnv({
        ...target.names,
        tables: appTableNames(target.names, jobs),
        ...settings,
        testHooks: flags.testHooks ?? false,
      }),
    },
  });
  let killed = false;
  killNow = () => {
    killed = true;
    say('killing the workers now; their jobs are taken over when their leases end');
    pool.killAll();
  };
  let stopping = false;
  const policy = new RestartPolicy();
  let gaveUp: string | undefined;
  let wake = () => {};
  const gaveUpAsked = new Promise<void>((resolve) => {
    wake = resolve;
  });
  // A worker that dies on its own is replaced after a growing pause; a few deaths in a row before a
  // worker ever polled end the command instead (RestartPolicy).
  pool.on('exit', (info) => {
    if (stopping) return;
    const decision = policy.decide(info);
    if (decision.action === 'give-up') {
      gaveUp = decision.reason;
      wake();
      return;
    }
    say(
      `worker ${info.id} exited (${RestartPolicy.describe(info)}); starting a replacement in ${decision.delayMs / 1000} s (restarts: ${policy.restarts})`,
    );
    setTimeout(() => {
      if (!stopping) void pool.spawn();
    }, decision.delayMs).unref();
  });
  pool.on('error', (id, message) => say(`worker ${id}: ${message}`));
  const started = pool.start().then(() => 'started' as const);
  let ticker: NodeJS.Timeout | undefined;
  if ((await Promise.race([started, stopAsked, gaveUpAsked])) === 'started' && !gaveUp) {
    say(
      `${flags.count} workers running ${jobs.types().join(', ')} from ${queueUrlName(target.names.queueUrl)}; ` +
        `logs in ${logDir}; Ctrl-C drains and stops`,
    );
    ticker = setInterval(() => {
      say(
        `succeeded ${pool.total('JobSucceeded')} | duplicates ${pool.total('DuplicateSkipped')} | ` +
          `retries ${pool.total('JobRetried')} | dead-lettered ${pool.total('JobDeadLettered')} | ` +
          `alive ${pool.alive}/${flags.count} | restarts ${policy.restarts}`,
      );
    }, 5000);
    await Promise.race([stopAsked, gaveUpAsked]);
  }
  stopping = true;
  clearInterval(ticker);
  const graceMs = flags.timeout * 1000 + STOP_MARGIN_MS;
  if (!killed) {
    say(
      `draining: no new jobs; jobs in flight finish or are given back by their ${flags.timeout} s deadline ` +
        `(workers still running in ${graceMs / 1000} s are killed); Ctrl-C again kills them now`,
    );
  }
  await pool.stop(graceMs);
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  const row = (worker: string, counters: Record<string, number>, exit: string) => ({
    worker,
    succeeded: counters.JobSucceeded ?? 0,
    duplicates: counters.DuplicateSkipped ?? 0,
    retries: counters.JobRetried ?? 0,
    deadLettered: counters.JobDeadLettered ?? 0,
    exit,
  });
  // The pool lists its latest dead workers one by one and sums the earlier ones (a long crash loop).
  const rows = [
    ...(pool.retired.workers > 0
      ? [row(`${pool.retired.workers} earlier workers`, pool.retired.counters, '-')]
      : []),
    ...[...pool.workers.values()].map((w) =>
      row(w.id, w.counters, w.startError ? 'not started' : (w.exitSignal ?? String(w.exitCode))),
    ),
  ];
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
  return gaveUp || killed ? 1 : 0;
}

function queueUrlName(url: string): string {
  return url.slice(url.lastIndexOf('/') + 1) || url;
}
