import type { Command } from 'commander';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import {
  type OperationalSmells,
  operationalSmells,
  poolMetricsDir,
  poolsOf,
  readPoolMetrics,
} from '../../shared/ops/smells.ts';
import { collectStatus, type StatusReport } from '../../shared/ops/status.ts';
import { durationArg, formatDuration, print, printJson, renderFields, renderTable } from '../format.ts';
import { safeText } from '../safe-text.ts';
import { serviceEndpointLines } from '../service-endpoints.ts';
import { resolveTarget, type TargetFlags, targetOptions } from '../target.ts';

interface StatusFlags extends TargetFlags {
  readonly stuckAfter?: number;
  readonly json?: boolean;
}

/** The last path segment of a queue URL: its name. */
export function queueName(url: string): string {
  return url.slice(url.lastIndexOf('/') + 1);
}

/** The human view of a status report. */
export function describeStatus(report: StatusReport): string {
  const { queue, dlq, jobs, namedLeases } = report;
  const statuses = Object.values(JobStatus)
    .map((s) => `${jobs.byStatus[s]} ${s}`)
    .join(', ');
  const lines = renderFields([
    [
      'queue',
      `${queueName(queue.url)}: ${queue.visible} visible, ${queue.inFlight} in flight, ${queue.delayed} delayed`,
    ],
    [
      'dlq',
      `${queueName(dlq.url)}: ${dlq.depth} message${dlq.depth === 1 ? '' : 's'}${dlq.depth > 0 ? ' (leaseq dlq list)' : ''}`,
    ],
    ['jobs', `${jobs.total} items: ${statuses}`],
    [
      'job leases',
      `${jobs.live} live, ${jobs.stuck} stuck (${jobs.stuckByReason['lease-expired']} expired, ` +
        `${jobs.stuckByReason['no-progress']} without progress for ${formatDuration(report.stuckAfterMs)}, ` +
        `${jobs.stuckByReason['retry-overdue']} retries overdue)` +
        (jobs.stuck > 0 ? '; see leaseq leases --stuck' : ''),
    ],
    [
      'named leases',
      `${namedLeases.held} held, ${namedLeases.abandoned} abandoned, ${namedLeases.free} free`,
    ],
    [
      'oldest job',
      jobs.oldestUnfinishedAgeMs === null
        ? 'no unfinished job items'
        : `unfinished job created ${formatDuration(jobs.oldestUnfinishedAgeMs)} ago`,
    ],
  ]);
  const workers =
    jobs.completedByWorker.length === 0
      ? 'no completed jobs yet'
      : renderTable(
          [{ header: 'WORKER' }, { header: 'COMPLETED', align: 'right' }],
          jobs.completedByWorker.map((w) => [w.worker, String(w.completed)]),
        );
  return `${lines}\n\n${workers}`;
}

/** The three operational smells of the running local workers, with a plain-words warning past a threshold. */
export function describeSmells(smells: OperationalSmells): string {
  const p = smells.pingPong;
  const lines = [
    `local workers (${smells.pools} pool${smells.pools === 1 ? '' : 's'}):`,
    `  ping-pong     ${p.receives} receives for ${p.attempts} attempts (${p.receivesPerAttempt.toFixed(2)} per attempt), ${p.handBacks} given back without running`,
    `  starvation    jobs per live worker: ${
      Object.entries(smells.starvation.jobsPerWorker)
        .map(([w, n]) => `${safeText(w)} ${n}`)
        .join(', ') || '-'
    } (skew ${smells.starvation.skew.toFixed(1)}x)`,
  ];
  for (const s of smells.storeLatency) {
    lines.push(
      `  store ${s.operation.padEnd(15)} ${String(s.calls).padStart(6)} calls, p50 ${s.p50Ms} ms, p99 ${s.p99Ms} ms, ${s.timeouts} abandoned at the bound`,
    );
  }
  const warnings = [
    p.warning,
    smells.starvation.warning,
    ...smells.storeLatency.map((s) => s.warning),
  ].filter(Boolean);
  for (const w of warnings) lines.push(`  warning: ${w}`);
  return lines.join('\n');
}

/** Adds `leaseq status`. */
export function register(program: Command): void {
  targetOptions(
    program
      .command('status')
      .description(
        'queue depth (visible / in flight / delayed), DLQ depth, job items by status, live and stuck leases, ' +
          'jobs completed per worker. Scans the jobs and leases tables: fine for local and demo sizes, a full ' +
          'table read on a big deployment (use the dashboard there)',
      )
      .option(
        '--stuck-after <duration>',
        'a live job lease with no claim or checkpoint for this long counts as stuck (default 10m)',
        durationArg,
      )
      .option('--json', 'print the report as JSON on stdout'),
  ).action(async (flags: StatusFlags) => {
    const target = await resolveTarget(flags);
    // Under the target line, which endpoint each service uses when one has its own (AWS_ENDPOINT_URL_SQS).
    const own = target.kind === 'aws' ? [] : serviceEndpointLines(target.endpoint);
    for (const line of own) process.stderr.write(`leaseq: ${line}\n`);
    try {
      const report = await collectStatus(
        target,
        flags.stuckAfter === undefined ? {} : { stuckAfterMs: flags.stuckAfter },
      );
      // Local worker pools (`leaseq workers`) keep their metrics in .leaseq/metrics; only those working
      // on this target's queue are its figures.
      const pools = poolsOf(readPoolMetrics(poolMetricsDir()), {
        endpoint: target.endpoint ?? null,
        queueArn: target.names.queueArn,
      });
      const smells = operationalSmells(pools);
      if (flags.json) printJson(smells ? { ...report, smells } : report);
      else print(smells ? `${describeStatus(report)}\n\n${describeSmells(smells)}` : describeStatus(report));
    } finally {
      target.close();
    }
  });
}
