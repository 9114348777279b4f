// `npm run chaos`: the leaseq chaos harness. It sends a mixed workload (duplicates, flaky, slow,
// crashing, named-lease and poison jobs), runs worker processes behind a fault proxy, SIGKILLs them at
// random, switches store faults on and off and freezes the emulator, then checks the store itself.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DeleteTableCommand } from '@aws-sdk/client-dynamodb';
import { DeleteQueueCommand, PurgeQueueCommand } from '@aws-sdk/client-sqs';
import { refreshStates, seedAccounts } from '../examples/ledger/demo/run-demo.ts';
import { seededRandom } from '../examples/ledger/generate.ts';
import { awsConfigFromEnv, createAwsClients, destroyAwsClients } from '../shared/aws/clients.ts';
import { JobStatus } from '../shared/core/contract/statuses.ts';
import { MetricName } from '../shared/core/observe/metric-names.ts';
import { metricKey } from '../shared/core/observe/metrics.ts';
import { ensureEmulator } from '../shared/local/emulator.ts';
import { provisionLocal } from '../shared/local/provision.ts';
import { queueStats, totalDepth } from '../shared/ops/queue-stats.ts';
import { sendMessages } from '../shared/producer/send-messages.ts';
import { WorkerPool } from '../shared/runner/worker-pool.ts';
import { workerEnv } from '../shared/worker/config.ts';
import { Canceller } from './canceller.ts';
import { checkRun } from './check.ts';
import { FaultScheduler } from './faults.ts';
import chaosJobs, { NAMED_LEASE_ENV } from './jobs.ts';
import { Killer } from './killer.ts';
import { readWorkerLogs } from './logs.ts';
import { MeetVariant } from './meet.ts';
import { type ChaosOptions, parseOptions, USAGE } from './options.ts';
import { EmulatorPauser } from './pauser.ts';
import { type ChaosReport, reportTable } from './report.ts';
import { sleep } from './timing.ts';
import { TOXIPROXY_VERSION, ToxiproxyFront, toxiproxyBinary } from './toxiproxy.ts';
import { workerCredential } from './worker-credential.ts';
import { CONTROL_FILE_ENV } from './worker-faults.ts';
import { planChaosWorkload } from './workload.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const JOB_MODULE = fileURLToPath(new URL('./jobs.ts', import.meta.url));
const PRELOAD = fileURLToPath(new URL('./worker-faults.ts', import.meta.url));
const COUNTERS = [
  'JobSucceeded',
  'DuplicateSkipped',
  'JobRetried',
  'JobDeadLettered',
  'LeaseExpired',
  'LeaseLost',
  'StoreUnavailable',
  'OptimisticConflict',
  'FastPathFallback',
  'JobCancelled',
  'CancelledCopyDropped',
];
/** Bounces of a job that found its tenant's slots all taken. */
const CONCURRENCY_WAITS = metricKey(MetricName.LimitWait, { kind: 'concurrency' });
/** The fast path's one-write commits the workers tried (their store-latency observations of it). */
const FAST_COMMIT_CALLS = metricKey(MetricName.StoreLatency, { operation: 'claimAndComplete' });

async function main(options: ChaosOptions): Promise<number> {
  const started = Date.now();
  const say = (line: string) =>
    process.stderr.write(`chaos +${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s ${line}\n`);
  const stateDir = join(ROOT, '.leaseq');
  const emulator = await ensureEmulator({ log: say });
  say(`store ${emulator.endpoint} (${emulator.mode}${emulator.pid ? `, pid ${emulator.pid}` : ''})`);
  const clients = createAwsClients({ ...awsConfigFromEnv(), endpoint: emulator.endpoint });
  const cleanups: (() => Promise<void> | void)[] = [() => destroyAwsClients(clients)];
  try {
    const provisioned = await provisionLocal({
      clients,
      prefix: options.fifo ? 'leaseq-chaos-fifo' : 'leaseq-chaos',
      stackProps: { fifo: options.fifo, jobs: chaosJobs, testHooks: true, maxAttempts: options.maxAttempts },
    });
    const o = provisioned.outputs;
    const names = {
      queueUrl: o.JobsQueueUrl,
      dlqUrl: o.DlqUrl,
      jobsTable: o.JobsTableName,
      leasesTable: o.LeasesTableName,
      ledgerTable: provisioned.appTables.ledger ?? '',
    };
    if (options.cleanup) {
      cleanups.push(async () => {
        for (const url of [names.queueUrl, names.dlqUrl]) {
          await clients.sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
        }
        for (const table of [names.jobsTable, names.leasesTable, names.ledgerTable]) {
          await clients.ddb.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
        }
        say("deleted the run's queues and tables");
      });
    }
    // The checker counts every letter of the DLQ and every message left in the queue as this run's.
    for (const url of [names.queueUrl, names.dlqUrl])
      await clients.sqs.send(new PurgeQueueCommand({ QueueUrl: url }));

    const runId = `chaos-${options.seed}-${Date.now().toString(36)}`;
    const workload = planChaosWorkload(runId, {
      jobs: options.jobs,
      seed: options.seed,
      leaseMs: options.leaseMs,
    });
    await seedAccounts(clients, names.ledgerTable, workload.accounts, workload.initialBalance);
    const logDir = join(stateDir, 'chaos', runId);
    mkdirSync(logDir, { recursive: true });
    say(
      `run ${runId}: ${workload.messages.length} messages, ${workload.counts.unique} jobs, logs in ${logDir}`,
    );

    // Toxiproxy between the workers and the store; the producer and the checker go direct.
    // CHAOS_TOXIPROXY=0 runs the SDK middleware faults only (as on a machine without Go).
    const binary = process.env.CHAOS_TOXIPROXY === '0' ? undefined : toxiproxyBinary(stateDir, say);
    const proxy = binary
      ? await ToxiproxyFront.start(binary, emulator.endpoint, join(logDir, 'toxiproxy.log'))
      : undefined;
    if (proxy) {
      cleanups.push(() => proxy.stop());
      say(`toxiproxy ${TOXIPROXY_VERSION} in front of the store at ${proxy.endpoint}`);
    }
    const random = seededRandom(`${options.seed}/chaos`);
    const faults = new FaultScheduler({
      proxy,
      controlFile: join(logDir, 'sdk-faults.json'),
      leaseMs: options.leaseMs,
      random,
      idleMs: options.pace.faultIdle,
      activeMs: options.pace.faultActive,
      log: say,
    });
    cleanups.push(() => faults.clear());

    const credential = workerCredential(emulator);
    const pool = new WorkerPool({
      count: options.workers,
      logDir,
      jobsModule: JOB_MODULE,
      env: {
        AWS_ENDPOINT_URL: proxy?.endpoint ?? emulator.endpoint,
        // Through the proxy (another port) the workers would not find the emulator's credential by its port.
        ...(credential
          ? { AWS_ACCESS_KEY_ID: credential.accessKeyId, AWS_SECRET_ACCESS_KEY: credential.secretAccessKey }
          : {}),
        NODE_OPTIONS:
          `${process.env.NODE_OPTIONS ?? ''} --import ${import.meta.resolve('tsx')} --import ${PRELOAD}`.trim(),
        [CONTROL_FILE_ENV]: join(logDir, 'sdk-faults.json'),
        [NAMED_LEASE_ENV]: String(options.leaseMs),
        POWERTOOLS_LOG_LEVEL: 'INFO',
        LEASEQ_BACKOFF_BASE_SECONDS: '1',
        LEASEQ_BACKOFF_CAP_SECONDS: '8',
        ...workerEnv({
          ...names,
          tables: { ledger: names.ledgerTable },
          testHooks: true,
          leaseMs: options.leaseMs,
          maxAttempts: options.maxAttempts,
        }),
      },
    });
    const killer = new Killer(pool);
    // Failed polls are expected while a fault is on: the worker backs off and polls again.
    let pollErrors = 0;
    pool.on('error', () => {
      pollErrors += 1;
    });
    let stopping = false;
    let restarts = 0;
    pool.on('exit', (info) => {
      if (stopping) return;
      killer.exited(info.id, info.exitSignal ?? `exit ${info.exitCode}`);
      restarts += 1;
      void pool.spawn();
    });
    cleanups.push(async () => {
      stopping = true;
      await pool.stop(10_000);
    });
    await pool.start();
    say(`${pool.alive} workers polling`);

    const chaos = new AbortController();
    /** Jobs still unfinished when the chaos window closed (0: the chaos lasted the whole run). */
    let chaosStoppedEarly = 0;
    const pauser = emulator.pid ? new EmulatorPauser(emulator.pid) : undefined;
    if (!pauser) say('no emulator process of our own (AWS_ENDPOINT_URL is set): no pauses');
    cleanups.push(() => pauser?.resume());
    const loops = Promise.all([
      faults.run(chaos.signal),
      killer.run(chaos.signal, random, options.pace.killIdle, say),
      pauser?.run(chaos.signal, random, options.pace.pauseIdle, options.pace.pauseLength, say),
    ]);

    let sent = 0;
    const states = new Map<string, string>();
    const keys = [...workload.expectedDone, ...workload.expectedDead];
    const count = (status: string) => [...states.values()].filter((s) => s === status).length;
    const finished = () => count(JobStatus.Completed) + count(JobStatus.Dead) + count(JobStatus.Cancelled);
    const progress = () =>
      `sent ${sent}/${workload.messages.length} | done ${count(JobStatus.Completed)} dead ${count(JobStatus.Dead)} cancelled ${count(JobStatus.Cancelled)} of ${keys.length} | ` +
      `kills ${killer.kills}+${killer.crashes}+${killer.exits} | faults ${faults.windows.length} | pauses ${pauser?.windows.length ?? 0} | ` +
      `takeovers ${pool.total('LeaseExpired')} retries ${pool.total('JobRetried')} | poll errors ${pollErrors} | workers ${pool.alive}`;
    const ticker = setInterval(() => say(progress()), 5000);
    cleanups.push(() => clearInterval(ticker));

    // Issue 31's input kinds beside the workload (--meet): their own keys, waits and checks (meet.ts).
    const meet = options.meet ? new MeetVariant(clients, names, runId, say) : undefined;
    const meetStop = new AbortController();
    const meeting = meet?.run(meetStop.signal).catch((error: unknown) => {
      say(`meet: ${error instanceof Error ? error.message : String(error)}`);
    });
    const report = await sendMessages(clients.sqs, names.queueUrl, workload.messages, {
      onProgress: (p) => {
        sent = p.sent;
      },
    });
    if (report.failed > 0)
      throw new Error(`SQS refused ${report.failed} messages: ${report.failures[0]?.message}`);

    // Cancels during the run, among the tenant jobs (their effects touch only their tenants' accounts, so
    // the demo's balances stand): about one in ten, one every 1-3 s while the faults go on.
    const tenantKeys = [...workload.tenants.jobs.keys()];
    const canceller = new Canceller(
      { clients, names },
      tenantKeys,
      tenantKeys.length === 0 ? 0 : Math.max(8, Math.round(tenantKeys.length / 10)),
    );
    const cancelling = canceller.run(chaos.signal, random, [1000, 3000], say);

    const deadline = started + options.timeoutSeconds * 1000;
    const chaosEnds = started + options.chaosSeconds * 1000;
    let timedOut = false;
    for (;;) {
      await refreshStates(clients, names.jobsTable, keys, states).catch(() => undefined);
      if (finished() >= keys.length) break;
      if (!chaos.signal.aborted && Date.now() > chaosEnds) {
        const left = keys.length - finished();
        say(
          `chaos window of ${options.chaosSeconds} s over with ${left} jobs left: they finish without faults`,
        );
        chaosStoppedEarly = left;
        chaos.abort();
      }
      if (Date.now() > deadline) {
        timedOut = true;
        say('timed out before every job finished');
        break;
      }
      await sleep(1000);
    }
    if (meet) {
      // The variant's keys may still wait (a redrive, a retry): the chaos goes on while they do.
      const meetEnd = Math.min(deadline, Date.now() + 90_000);
      const stopAt = setTimeout(() => meetStop.abort(), Math.max(0, meetEnd - Date.now()));
      await meeting;
      await meet.settle(meetEnd);
      clearTimeout(stopAt);
    }
    say(`every job finished (${progress()}); stopping the chaos`);
    chaos.abort();
    await loops;
    await cancelling;
    // Duplicates still in the queue run into completed jobs and are dropped; give them time to.
    const drainDeadline = Date.now() + 90_000;
    while (totalDepth(await queueStats(clients.sqs, names.queueUrl)) > 0 && Date.now() < drainDeadline)
      await sleep(1000);
    stopping = true;
    await pool.stop(10_000);
    proxy?.stop();
    const counters = {
      ...Object.fromEntries(COUNTERS.map((c) => [c, pool.total(c)])),
      ConcurrencyWaits: pool.total(CONCURRENCY_WAITS),
    };

    const windows = [...faults.windows, ...(pauser?.windows ?? [])];
    const check = await checkRun(clients, names, workload, {
      deaths: killer.deaths,
      windows,
      logs: readWorkerLogs(logDir),
      counters,
      fastCommitCalls: pool.observed(FAST_COMMIT_CALLS),
      leaseMs: options.leaseMs,
      cancels: canceller.records,
    });
    const meetResult = await meet?.check();
    const violations = [...check.violations, ...(meetResult?.violations ?? []).map((v) => `meet: ${v}`)];
    const burst = check.figures.tenants.perTenant[workload.tenants.burstTenant];
    if (burst && burst.maxConcurrent < workload.tenants.limit)
      violations.push(
        `chaos too thin: the burst tenant never had ${workload.tenants.limit} runs at once (its limit was never reached)`,
      );
    if (tenantKeys.length > 0 && check.figures.cancels.acknowledged === 0)
      violations.push('chaos too thin: no cancel was acknowledged');
    if (timedOut) violations.push(`timed out after ${options.timeoutSeconds} s`);
    if (killer.kills === 0) violations.push('chaos too thin: no worker was killed');
    if (faults.windows.length === 0) violations.push('chaos too thin: no store fault was switched on');
    if (pauser && pauser.windows.length === 0)
      violations.push('chaos too thin: the emulator was never paused');
    const result: ChaosReport = {
      runId,
      seed: options.seed,
      variant: `${options.ci ? 'ci' : 'full'}${options.fifo ? ', fifo' : ''}${options.meet ? ', meet' : ''}`,
      startedAt: new Date(started).toISOString(),
      durationMs: Date.now() - started,
      timedOut,
      settings: { ...options, toxiproxy: proxy ? TOXIPROXY_VERSION : null, endpoint: emulator.endpoint },
      workload: {
        ...workload.counts,
        locked: workload.locked,
        fast: workload.fast,
        tenant: workload.tenants.jobs.size,
        messages: workload.messages.length,
      },
      chaos: {
        kills: killer.kills,
        crashes: killer.crashes,
        exits: killer.exits,
        restarts,
        faults: faults.counts(),
        faultMode: proxy ? `toxiproxy ${TOXIPROXY_VERSION} + sdk middleware` : 'sdk middleware only',
        pauses: pauser?.windows.length ?? 0,
        pausedMs: (pauser?.windows ?? []).reduce((n, w) => n + ((w.end ?? w.start) - w.start), 0),
        leftAtWindowEnd: chaosStoppedEarly,
      },
      check: { ...check, violations },
      counters,
      ...(meetResult ? { meet: meetResult.figures } : {}),
      verdict: violations.length === 0 ? 'PASS' : 'FAIL',
    };
    const jsonPath = options.json ?? join(stateDir, 'chaos', `${runId}.json`);
    mkdirSync(dirname(jsonPath), { recursive: true });
    writeFileSync(
      jsonPath,
      `${JSON.stringify({ ...result, deaths: killer.deaths, windows, cancels: canceller.records }, null, 2)}\n`,
    );
    process.stdout.write(reportTable(result));
    say(`JSON report: ${jsonPath}`);
    return violations.length === 0 ? 0 : 1;
  } finally {
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
  }
}

let options: ChaosOptions;
try {
  options = parseOptions(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${USAGE}\n`);
  process.exit(2);
}
main(options).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `chaos: failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
