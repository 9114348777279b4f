import { type Command, InvalidArgumentError } from 'commander';
import { PROBLEM_SHARDS, PROBLEMS_INDEX } from '../../shared/core/contract/job-history.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import {
  listProblemJobs,
  PROBLEM_JOBS_DEFAULT_LIMIT,
  PROBLEM_JOBS_MAX_LIMIT,
  type ProblemJobsResult,
  type ProblemStatusFilter,
} from '../../shared/ops/problem-jobs.ts';
import {
  durationArg,
  formatDuration,
  formatErrorText,
  formatRelative,
  integerArg,
  print,
  printJson,
  renderTable,
} from '../format.ts';
import { resolveTarget, type TargetFlags, targetOptions } from '../target.ts';

interface JobsFlags extends TargetFlags {
  readonly status?: ProblemStatusFilter[];
  readonly type?: string;
  readonly error?: string;
  readonly reason?: string;
  readonly since?: number;
  readonly limit?: number;
  readonly cursor?: string;
  readonly stuckAfter?: number;
  readonly json?: boolean;
}

const STATUS_CHOICES: readonly ProblemStatusFilter[] = [
  JobStatus.RetryWait,
  JobStatus.Dead,
  JobStatus.InProgress,
  JobStatus.Completed,
  JobStatus.Cancelled,
  'stuck',
];

/** Parser of `--status`: a comma-separated list; `COMPLETED(retried)` and any case are accepted. */
export function statusArg(value: string): ProblemStatusFilter[] {
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => (s.toLowerCase() === 'stuck' ? 'stuck' : s.toUpperCase().replace(/\(RETRIED\)$/, '')));
  const bad = items.filter((s) => !(STATUS_CHOICES as readonly string[]).includes(s));
  if (items.length === 0 || bad.length > 0) {
    throw new InvalidArgumentError(
      `${bad.length > 0 ? `unknown ${bad.join(', ')}; ` : ''}expected a comma-separated list of ${STATUS_CHOICES.join(', ')}`,
    );
  }
  return [...new Set(items)] as ProblemStatusFilter[];
}

/** The human view: one line per job, newest problem first, then what the listing read. */
export function describeProblemJobs(result: ProblemJobsResult, now: number): string {
  const table =
    result.jobs.length === 0
      ? 'no jobs with a problem match'
      : renderTable(
          [
            { header: 'DEDUP KEY' },
            { header: 'STATUS' },
            { header: 'TYPE' },
            { header: 'ATTEMPTS', align: 'right' },
            { header: 'LAST ERROR', max: 70 },
            { header: 'LAST PROBLEM' },
            { header: 'AGE' },
          ],
          result.jobs.map((j) => [
            j.dedupKey,
            j.stuck ? `${j.status} (stuck: ${j.stuck})` : j.status,
            j.type ?? '',
            String(j.attempts),
            formatErrorText(j.lastErrorClass, j.lastError) ?? '',
            formatRelative(j.problemAt, now),
            j.ageMs === undefined ? '' : formatDuration(j.ageMs),
          ]),
        );
  const cost =
    `read ${result.itemsRead} ${PROBLEMS_INDEX}-index entr${result.itemsRead === 1 ? 'y' : 'ies'}, ` +
    `${result.readUnits} RCU, in ${result.queries} quer${result.queries === 1 ? 'y' : 'ies'} over ${PROBLEM_SHARDS} shards`;
  const more = result.next ? `\nmore: --cursor ${result.next}` : '';
  return `${table}\n\n${cost}${more}`;
}

/** Adds `leaseq jobs`. */
export function register(program: Command): void {
  targetOptions(
    program
      .command('jobs')
      .description(
        'jobs that had a problem (a failure, a takeover, a lost lease, dead-lettering, a redrive), newest ' +
          `problem first, from the jobs table's sparse ${PROBLEMS_INDEX} index: reads only those jobs, never ` +
          'the ones that completed first time',
      )
      .option(
        '--status <list>',
        'comma-separated: RETRY_WAIT, DEAD, IN_PROGRESS, stuck (as `leaseq leases --stuck` decides it), ' +
          'COMPLETED (jobs that completed after a problem: retried), CANCELLED',
        statusArg,
      )
      .option('--type <type>', 'only jobs of this type')
      .option('--error <text>', 'only jobs whose last error (class or message) contains this, any case')
      .option(
        '--reason <reason>',
        'only jobs with this dead reason (e.g. max-attempts) or stuck reason, exactly',
      )
      .option('--since <duration>', 'only jobs whose last problem is this recent (e.g. 1h, 30m)', durationArg)
      .option(
        '--limit <n>',
        `most jobs to show (default ${PROBLEM_JOBS_DEFAULT_LIMIT}, at most ${PROBLEM_JOBS_MAX_LIMIT})`,
        integerArg(1, PROBLEM_JOBS_MAX_LIMIT),
      )
      .option('--cursor <cursor>', 'continue a listing where it stopped (printed as `more:`; same flags)')
      .option(
        '--stuck-after <duration>',
        'a live job lease with no claim or checkpoint for this long counts as stuck (default 10m)',
        durationArg,
      )
      .option('--json', 'print the jobs, the read units and the next cursor as JSON on stdout'),
  ).action(async (flags: JobsFlags) => {
    const target = await resolveTarget(flags);
    try {
      const now = Date.now();
      const result = await listProblemJobs(
        target,
        {
          ...(flags.status ? { status: flags.status } : {}),
          ...(flags.type === undefined ? {} : { type: flags.type }),
          ...(flags.error === undefined ? {} : { errorContains: flags.error }),
          ...(flags.reason === undefined ? {} : { reason: flags.reason }),
          ...(flags.since === undefined ? {} : { since: now - flags.since }),
          ...(flags.limit === undefined ? {} : { limit: flags.limit }),
          ...(flags.cursor === undefined ? {} : { cursor: flags.cursor }),
          ...(flags.stuckAfter === undefined ? {} : { stuckAfterMs: flags.stuckAfter }),
        },
        now,
      );
      if (flags.json) printJson(result);
      else print(describeProblemJobs(result, now));
    } finally {
      target.close();
    }
  });
}
