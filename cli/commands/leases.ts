import type { Command } from 'commander';
import { type LeasesReport, listLeases } from '../../shared/ops/leases.ts';
import { durationArg, formatDuration, formatLease, print, printJson, renderTable } from '../format.ts';
import { resolveTarget, type TargetFlags, targetOptions } from '../target.ts';

interface LeasesFlags extends TargetFlags {
  readonly stuck?: boolean;
  readonly stuckAfter?: number;
  readonly json?: boolean;
}

/** The human view: a table of job leases and one of named leases. */
export function describeLeases(report: LeasesReport, stuckOnly: boolean): string {
  const what = stuckOnly ? 'stuck ' : '';
  const jobs =
    report.jobLeases.length === 0
      ? `no ${what}job leases`
      : renderTable(
          [
            { header: 'DEDUP KEY' },
            { header: 'TYPE' },
            { header: 'OWNER' },
            { header: 'TOKEN', align: 'right' },
            { header: 'ATTEMPTS', align: 'right' },
            { header: 'LEASE' },
            { header: 'CHECKPOINT' },
            { header: 'STUCK' },
          ],
          report.jobLeases.map((l) => [
            l.dedupKey,
            l.type ?? '',
            l.owner ?? '',
            String(l.token),
            String(l.attempts),
            formatLease(l.remainingMs),
            l.checkpointStep ?? '',
            l.stuck ?? '',
          ]),
        );
  const named =
    report.namedLeases.length === 0
      ? `no ${stuckOnly ? 'abandoned ' : ''}named leases`
      : renderTable(
          [
            { header: 'LEASE KEY' },
            { header: 'OWNER' },
            { header: 'TOKEN', align: 'right' },
            { header: 'STATE' },
            { header: 'LEASE' },
          ],
          report.namedLeases.map((l) => [
            l.leaseKey,
            l.owner ?? '',
            String(l.token),
            l.state,
            l.state === 'free' ? '' : formatLease(l.remainingMs),
          ]),
        );
  const rule = stuckOnly
    ? `\n\nstuck: lease expired, or live with no claim or checkpoint for ${formatDuration(report.stuckAfterMs)}, ` +
      `or a RETRY_WAIT job whose retry is overdue by as long (retry-overdue); ` +
      'abandoned: the holder of a named lease let it end without releasing it'
    : '';
  return `JOB LEASES (IN_PROGRESS items, and RETRY_WAIT items whose retry is overdue)\n${jobs}\n\nNAMED LEASES (leases table)\n${named}${rule}`;
}

/** Adds `leaseq leases`. */
export function register(program: Command): void {
  targetOptions(
    program
      .command('leases')
      .description(
        'job leases (IN_PROGRESS items of the jobs table) and named leases (the leases table) with owner, ' +
          'token and time left; scans both tables',
      )
      .option(
        '--stuck',
        'only stuck job leases (expired but not finished, or no progress for --stuck-after), RETRY_WAIT jobs whose retry is overdue by --stuck-after, and abandoned named leases',
      )
      .option(
        '--stuck-after <duration>',
        'a live job lease with no claim or checkpoint for this long counts as stuck (default 10m)',
        durationArg,
      )
      .option('--json', 'print the leases as JSON on stdout'),
  ).action(async (flags: LeasesFlags) => {
    const target = await resolveTarget(flags);
    try {
      const report = await listLeases(target, {
        stuckOnly: flags.stuck ?? false,
        ...(flags.stuckAfter === undefined ? {} : { stuckAfterMs: flags.stuckAfter }),
      });
      if (flags.json) printJson(report);
      else print(describeLeases(report, flags.stuck ?? false));
    } finally {
      target.close();
    }
  });
}
