import type { Command } from 'commander';
import { type InspectReport, inspectJob } from '../../shared/ops/inspect.ts';
import type { TimelineEntry } from '../../shared/ops/timeline.ts';
import {
  durationArg,
  formatErrorText,
  formatInstant,
  formatLease,
  formatRelative,
  print,
  printJson,
  renderFields,
  renderTable,
  truncate,
} from '../format.ts';
import { safeText } from '../safe-text.ts';
import { resolveTarget, type TargetFlags, targetOptions } from '../target.ts';

interface InspectFlags extends TargetFlags {
  readonly stuckAfter?: number;
  readonly json?: boolean;
}

/** A JSON value on one line, cut to fit a terminal line. */
function compactJson(value: unknown, max = 200): string {
  return truncate(JSON.stringify(value) ?? 'undefined', max);
}

/**
 * The human view of one job item. Every value is escaped (safe-text.ts): a job's last error, result and
 * checkpoint data carry whatever its handler or its producer wrote.
 */
export function describeJob(report: InspectReport, now: number): string {
  const job = report.job;
  const key = safeText(job.dedupKey);
  const lease = report.lease
    ? `${formatLease(report.lease.remainingMs)}${report.lease.stuck ? ` (STUCK: ${report.lease.stuck})` : ''}`
    : report.retryInMs !== undefined
      ? `released; retry due ${formatRelative(job.leaseUntil, now)}`
      : undefined;
  const checkpoint = job.checkpoint
    ? `${job.checkpoint.step} (done: ${job.checkpoint.done.join(' -> ') || '-'}) at ${formatInstant(job.checkpoint.at, now)}`
    : undefined;
  const fields = renderFields([
    ['dedup key', job.dedupKey],
    ['type', job.type],
    ['status', job.status],
    [
      'owner',
      job.owner ?? (job.status === 'IN_PROGRESS' || job.status === 'RETRY_WAIT' ? '(none)' : undefined),
    ],
    ['lease', lease],
    ['token', String(job.token)],
    ['attempts', String(job.attempts)],
    ['version', String(job.version)],
    ['message id', job.messageId],
    ['checkpoint', checkpoint],
    ['checkpoint data', job.checkpoint?.data === undefined ? undefined : compactJson(job.checkpoint.data)],
    ['last error', job.lastError ? formatErrorText(job.lastErrorClass, job.lastError) : undefined],
    ['result', job.result === undefined ? undefined : compactJson(job.result)],
    ['created', formatInstant(job.createdAt, now)],
    ['claimed', formatInstant(job.claimedAt, now)],
    ['updated', formatInstant(job.updatedAt, now)],
    ['completed', formatInstant(job.completedAt, now)],
    ['expires (TTL)', job.expiresAt === undefined ? undefined : formatInstant(job.expiresAt * 1000, now)],
  ]);
  const deadKey = report.deadKey
    ? report.deadKey.droppedUntil === 'ttl'
      ? '; copies sent under its key are dropped until TTL removes the item'
      : report.deadKey.droppedUntil > now
        ? `; copies sent under its key are dropped until ${formatInstant(report.deadKey.droppedUntil, now)} (deadKeyTtl), a send after that runs as a new job`
        : `; its deadKeyTtl ended ${formatInstant(report.deadKey.droppedUntil, now)}: a send under its key runs as a new job`
    : '';
  const hint =
    job.status === 'DEAD'
      ? `\n\nthe job is dead-lettered: \`leaseq dlq show ${key}\` shows why; \`leaseq dlq redrive --dedup-key ${key}\` runs it again${deadKey}`
      : job.status === 'CANCELLED'
        ? `\n\nthe job is cancelled${job.type === undefined ? ' (before its message came: a tombstone)' : ''}: it never runs again, and copies sent under its key are dropped until TTL removes the item`
        : '';
  const leases =
    report.ownerLeases.length === 0
      ? ''
      : `\n\nNAMED LEASES HELD BY ${safeText(job.owner ?? '')}\n${renderTable(
          [
            { header: 'LEASE KEY' },
            { header: 'TOKEN', align: 'right' },
            { header: 'STATE' },
            { header: 'LEASE' },
          ],
          report.ownerLeases.map((l) => [l.leaseKey, String(l.token), l.state, formatLease(l.remainingMs)]),
        )}`;
  const history = job.historyDropped ? ` (${job.historyDropped} older events dropped)` : '';
  const timeline =
    report.timeline.length === 0
      ? ''
      : `\n\nTIMELINE${history}\n${report.timeline.map((entry) => describeEntry(entry)).join('\n')}`;
  return `${fields}${leases}${timeline}${hint}`;
}

/** One timeline line: time, kind, attempt/owner/token, title and detail (escaped: errors are the job's text). */
export function describeEntry(entry: TimelineEntry): string {
  const who = [
    entry.attempt === undefined ? undefined : `attempt ${entry.attempt}`,
    entry.owner === undefined ? undefined : `owner ${entry.owner}`,
    entry.token === undefined ? undefined : `token ${entry.token}`,
  ]
    .filter((part) => part !== undefined)
    .join(', ');
  const line = [
    new Date(entry.at).toISOString(),
    entry.kind.padEnd(10),
    who === '' ? '-' : who,
    entry.title,
    ...(entry.detail === undefined ? [] : [entry.detail]),
  ].join('  ');
  return safeText(line);
}

/** Adds `leaseq inspect <dedupKey>`. */
export function register(program: Command): void {
  targetOptions(
    program
      .command('inspect')
      .description(
        'one job item by dedup key: status, owner, lease, fencing token, attempts, checkpoint, last error, ' +
          'result, timestamps, the named leases its owner holds, and its timeline (retries, takeovers, lost ' +
          'leases, dead-lettering, a cancel; exit 1 when there is no such item)',
      )
      .argument('<dedupKey>', 'the dedup key of the job')
      .option(
        '--stuck-after <duration>',
        'a live job lease with no claim or checkpoint for this long counts as stuck (default 10m)',
        durationArg,
      )
      .option('--json', 'print the item and its timeline as JSON on stdout'),
  ).action(async (dedupKey: string, flags: InspectFlags) => {
    const target = await resolveTarget(flags);
    try {
      const report = await inspectJob(
        target,
        dedupKey,
        flags.stuckAfter === undefined ? {} : { stuckAfterMs: flags.stuckAfter },
      );
      if (!report) {
        throw new Error(
          `no job item for dedup key ${JSON.stringify(dedupKey)} in ${target.names.jobsTable} (never claimed, or removed by TTL)`,
        );
      }
      if (flags.json) printJson(report);
      else print(describeJob(report, Date.parse(report.at)));
    } finally {
      target.close();
    }
  });
}
