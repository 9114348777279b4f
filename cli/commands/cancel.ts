import type { Command } from 'commander';
import {
  BULK_DEFAULT_LIMIT,
  BULK_DEFAULT_RATE,
  BULK_MAX_LIMIT,
  type BulkCancelFilter,
  type BulkCancelPreview,
  type BulkCancelReport,
  bulkCancel,
  checkBulkFilter,
  describeBulkCancel,
  previewBulkCancel,
} from '../../shared/ops/bulk-cancel.ts';
import { cancelJob, checkDedupKey, describeCancel } from '../../shared/ops/cancel.ts';
import { OpsError } from '../../shared/ops/ops-errors.ts';
import type { ProblemStatusFilter } from '../../shared/ops/problem-jobs.ts';
import { checkActor, resolveActor } from '../actor.ts';
import { confirmChange, isInteractive } from '../confirm.ts';
import {
  durationArg,
  formatErrorText,
  formatRelative,
  integerArg,
  note,
  print,
  printJson,
  rateArg,
  renderTable,
} from '../format.ts';
import { EXIT_INTERRUPTED, stoppable } from '../interrupt.ts';
import { safeText } from '../safe-text.ts';
import { resolveTarget, type Target, type TargetFlags, targetOptions } from '../target.ts';
import { statusArg } from './jobs.ts';

interface CancelFlags extends TargetFlags {
  readonly reason?: string;
  readonly yes?: boolean;
  readonly json?: boolean;
  readonly actor?: string;
  readonly type?: string;
  readonly errorMatch?: string;
  readonly since?: number;
  readonly status?: ProblemStatusFilter[];
  readonly rate?: number;
  readonly limit?: number;
  readonly dryRun?: boolean;
}

/** Exit code of a cancel that found the job finished (COMPLETED or DEAD): nothing was cancelled. */
export const EXIT_FINISHED = 3;
/** Rows of a bulk cancel's preview shown before the confirmation. */
export const PREVIEW_ROWS = 10;

/** Adds `leaseq cancel <dedupKey>` and `leaseq cancel --type/--error-match/--since`. */
export function register(program: Command): void {
  targetOptions(
    program
      .command('cancel')
      .description(
        'cancel a job by dedup key, or every unfinished job a filter finds in the problems index (a preview ' +
          'first): a running job stops at its next heartbeat and commits nothing, a job waiting for a retry ' +
          'never runs again, a key not sent yet drops its message when it comes; exit 0 when cancelled (or ' +
          `already), ${EXIT_FINISHED} when the one job had already finished (COMPLETED or DEAD)`,
      )
      .argument('[dedupKey]', 'the dedup key of the job (or a filter instead)')
      .option('--reason <text>', 'why: kept in the job history (`leaseq inspect` shows it)')
      .option('--type <type>', 'bulk: every unfinished job of this type')
      .option('--error-match <text>', 'bulk: only jobs whose last error contains this, any case')
      .option(
        '--since <duration>',
        'bulk: only jobs whose last problem is this recent (e.g. 2h, 30m)',
        durationArg,
      )
      .option('--status <list>', 'bulk: RETRY_WAIT, IN_PROGRESS or stuck (default: both statuses)', statusArg)
      .option('--rate <rate>', `bulk: jobs per second at most (default ${BULK_DEFAULT_RATE})`, rateArg)
      .option(
        '--limit <n>',
        `bulk: at most this many jobs (default ${BULK_DEFAULT_LIMIT})`,
        integerArg(1, BULK_MAX_LIMIT),
      )
      .option('--dry-run', 'bulk: show the jobs the filter finds; change nothing')
      .option(
        '--actor <name>',
        'who acts, for the job history (default: the STS caller on AWS, else user@host)',
      )
      .option('--yes', 'do not ask (scripts, CI); without a terminal a cancel refuses without it')
      .option('--json', 'print the result as JSON on stdout'),
  ).action(async (dedupKey: string | undefined, flags: CancelFlags) => {
    // Bad arguments are refused before anything is asked or touched.
    const filter = bulkFilter(dedupKey, flags);
    if (flags.actor !== undefined) checkActor(flags.actor);
    if (filter === undefined) checkDedupKey(dedupKey ?? '');
    else checkBulkFilter(filter);
    const target = await resolveTarget(flags);
    try {
      if (filter) await cancelByFilter(target, filter, flags);
      else await cancelOne(target, dedupKey ?? '', flags);
    } finally {
      target.close();
    }
  });
}

/** The filter of a bulk cancel, undefined for one job by key; refuses flags that mix the two. */
export function bulkFilter(dedupKey: string | undefined, flags: CancelFlags): BulkCancelFilter | undefined {
  const bulkFlags = [
    flags.type === undefined ? undefined : '--type',
    flags.errorMatch === undefined ? undefined : '--error-match',
    flags.since === undefined ? undefined : '--since',
  ].filter((f) => f !== undefined);
  const bulkOnly = [
    flags.status === undefined ? undefined : '--status',
    flags.rate === undefined ? undefined : '--rate',
    flags.limit === undefined ? undefined : '--limit',
    flags.dryRun ? '--dry-run' : undefined,
  ].filter((f) => f !== undefined);
  if (dedupKey !== undefined) {
    const mixed = [...bulkFlags, ...bulkOnly];
    if (mixed.length > 0) {
      throw new OpsError(
        `a dedup key cancels one job; ${mixed.join(', ')} ${mixed.length === 1 ? 'is' : 'are'} for a cancel by filter: drop the key or the flag`,
      );
    }
    return undefined;
  }
  if (bulkFlags.length === 0) {
    throw new OpsError(
      `give a dedup key, or a filter: --type, --error-match or --since${bulkOnly.length ? ` (${bulkOnly.join(', ')} alone selects nothing)` : ''}`,
    );
  }
  return {
    ...(flags.type === undefined ? {} : { type: flags.type }),
    ...(flags.errorMatch === undefined ? {} : { errorContains: flags.errorMatch }),
    ...(flags.since === undefined ? {} : { since: Date.now() - flags.since }),
    ...(flags.status === undefined ? {} : { status: flags.status }),
  };
}

async function cancelOne(target: Target, dedupKey: string, flags: CancelFlags): Promise<void> {
  const key = safeText(dedupKey);
  const confirmed = await confirmChange(
    {
      verb: 'cancel',
      name: key,
      what: `job ${key} in table ${target.names.jobsTable}: it will never run (again); this cannot be undone`,
      local: target.local,
    },
    flags.yes,
  );
  if (!confirmed) {
    process.exitCode = 1;
    return;
  }
  const result = await cancelJob(target, dedupKey, {
    by: await resolveActor(flags.actor, target),
    ...(flags.reason === undefined ? {} : { reason: flags.reason }),
  });
  if (flags.json) printJson({ dedupKey, ...result });
  else print(safeText(describeCancel(dedupKey, result)));
  if (result.outcome === 'finished') process.exitCode = EXIT_FINISHED;
}

/** The preview as a person reads it: the count, the first rows, and what finding them read. */
export function describePreview(preview: BulkCancelPreview, now: number, rows = PREVIEW_ROWS): string {
  const n = preview.jobs.length;
  if (n === 0) return 'no unfinished job in the problems index matches; nothing to cancel';
  const shown = preview.jobs.slice(0, rows);
  const table = renderTable(
    [
      { header: 'DEDUP KEY', max: 40 },
      { header: 'STATUS' },
      { header: 'TYPE' },
      { header: 'ATTEMPTS', align: 'right' },
      { header: 'LAST ERROR', max: 60 },
      { header: 'LAST PROBLEM' },
    ],
    shown.map((j) => [
      j.dedupKey,
      j.stuck ? `${j.status} (stuck)` : j.status,
      j.type ?? '',
      String(j.attempts),
      formatErrorText(j.lastErrorClass, j.lastError) ?? '',
      formatRelative(j.problemAt, now),
    ]),
  );
  const more = preview.more ? ` (more match: only the first ${preview.limit} are taken; raise --limit)` : '';
  const rest = n > shown.length ? `\n… and ${n - shown.length} more` : '';
  return `${table}${rest}\n\n${n} job${n === 1 ? '' : 's'} match${n === 1 ? 'es' : ''}${more}; read ${preview.reads.itemsRead} index entries, ${preview.reads.readUnits} RCU`;
}

async function cancelByFilter(target: Target, filter: BulkCancelFilter, flags: CancelFlags): Promise<void> {
  const preview = await previewBulkCancel(target, filter, {
    ...(flags.limit === undefined ? {} : { limit: flags.limit }),
  });
  const n = preview.jobs.length;
  if (flags.dryRun || n === 0) {
    if (flags.json)
      printJson({ dryRun: true, matched: n, more: preview.more, reads: preview.reads, jobs: preview.jobs });
    else
      print(
        `${describePreview(preview, Date.now(), flags.dryRun ? BULK_MAX_LIMIT : PREVIEW_ROWS)}${flags.dryRun ? '\ndry run: nothing was changed' : ''}`,
      );
    return;
  }
  // Shown to whoever is asked, before the question (with --yes after the line saying what); a refusal
  // for want of a terminal stays one line.
  const shown = () => note(describePreview(preview, Date.now()).replaceAll('\n', '\n  '));
  if (!flags.yes && isInteractive()) shown();
  const rate = flags.rate ?? BULK_DEFAULT_RATE;
  const confirmed = await confirmChange(
    {
      verb: 'cancel',
      name: `${n} jobs`,
      what: `${n} job${n === 1 ? '' : 's'} in table ${target.names.jobsTable}, ${rate} a second: they will never run (again); this cannot be undone`,
      local: target.local,
    },
    flags.yes,
  );
  if (!confirmed) {
    process.exitCode = 1;
    return;
  }
  if (flags.yes) shown();
  const by = await resolveActor(flags.actor, target);
  const report = await stoppable((signal) =>
    bulkCancel(target, preview, {
      by,
      ratePerSecond: rate,
      signal,
      ...(flags.reason === undefined ? {} : { reason: flags.reason }),
      ...(flags.json || !process.stderr.isTTY
        ? {}
        : {
            onProgress: (item, done, total) =>
              note(`${done}/${total} ${item.outcome} ${safeText(item.dedupKey)}`),
          }),
    }),
  );
  if (flags.json) printJson({ dryRun: false, matched: n, by, ...report });
  else print(describeBulkReport(report));
  if (report.failed > 0) process.exitCode = 1;
  if (report.interrupted) process.exitCode = EXIT_INTERRUPTED;
}

/** The human view of a bulk cancel's result: every job acted on, then the summary. */
export function describeBulkReport(report: BulkCancelReport): string {
  const table =
    report.items.length === 0
      ? 'no job was acted on'
      : renderTable(
          [
            { header: 'DEDUP KEY', max: 40 },
            { header: 'OUTCOME' },
            { header: 'WAS' },
            { header: 'WHY', max: 80 },
          ],
          report.items.map((i) => [i.dedupKey, i.outcome, i.status ?? '', i.why ?? '']),
        );
  return `${table}\n\n${safeText(describeBulkCancel(report))}`;
}
