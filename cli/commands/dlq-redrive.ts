// `leaseq dlq redrive` (docs/cli.md): by filter (type, reason, error text, time window) or by key, with a
// preview of the dead jobs the filter finds before the confirmation, a rate, progress, Ctrl-C that stops
// between two letters, and the actor in each job's `redrive` event.
import type { Command } from 'commander';
import { BULK_DEFAULT_RATE } from '../../shared/ops/bulk-cancel.ts';
import { assertKnownReason, type DeadLetterFilter } from '../../shared/ops/dlq-letters.ts';
import { type RedriveReport, redrive } from '../../shared/ops/dlq-redrive.ts';
import { previewRedrive, type RedrivePreview } from '../../shared/ops/dlq-redrive-preview.ts';
import { OpsError } from '../../shared/ops/ops-errors.ts';
import { ProblemsIndexMissingError } from '../../shared/ops/problem-jobs.ts';
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
import { jobModuleOption } from '../job-module.ts';
import { resolveTarget, type Target, type TargetFlags, targetOptions } from '../target.ts';
import { readPayloadFile, schemaCheck } from './redrive-input.ts';
import { queueName } from './status.ts';

interface RedriveFlags extends TargetFlags {
  readonly type?: string;
  readonly reason?: string;
  readonly dedupKey?: string;
  readonly errorMatch?: string;
  readonly since?: number;
  readonly dryRun?: boolean;
  readonly includeInvalid?: boolean;
  readonly rate?: number;
  readonly limit?: number;
  readonly actor?: string;
  readonly json?: boolean;
  readonly yes?: boolean;
  readonly payloadFile?: string;
  readonly jobModule?: string;
}

/** The human view of a redrive. */
export function describeRedrive(report: RedriveReport): string {
  const table =
    report.items.length === 0
      ? 'no dead letters match'
      : renderTable(
          [
            { header: 'MESSAGE ID', max: 36 },
            { header: 'DEDUP KEY', max: 40 },
            { header: 'TYPE' },
            { header: 'REASON' },
            { header: 'OUTCOME' },
            { header: 'RESET' },
            { header: 'DETAIL', max: 70 },
          ],
          report.items.map((i) => [
            i.messageId,
            i.dedupKey ?? '',
            i.type ?? '',
            i.reason,
            i.skip ? `${i.outcome} (${i.skip})` : i.outcome,
            i.reset ? 'yes' : 'no',
            i.detail ?? '',
          ]),
        );
  // Letters that came back during the redrive are the same jobs, not more letters: say so apart.
  const again =
    report.deadAgain > 0
      ? ` (${report.deadAgain} of them dead-lettered again while it ran; their new letters stay in the DLQ)`
      : '';
  // A second letter of one death is not a new failure of the job: counted apart, and it stays.
  const duplicates =
    report.duplicates > 0
      ? `; ${report.duplicates} second letter${report.duplicates === 1 ? '' : 's'} of a death ${report.dryRun ? 'it would send' : 'it sent'} back, left in the DLQ`
      : '';
  // Why letters stayed, by reason (docs/cli.md lists them): `skipped 3 (2 newer-job, 1 completed)`.
  const reasons = new Map<string, number>();
  for (const i of report.items) if (i.skip) reasons.set(i.skip, (reasons.get(i.skip) ?? 0) + 1);
  const why = reasons.size ? ` (${[...reasons].map(([skip, n]) => `${n} ${skip}`).join(', ')})` : '';
  const summary = report.dryRun
    ? `dry run: would redrive ${report.redriven}, skip ${report.skipped}${why}${duplicates}; nothing was changed`
    : `redrove ${report.redriven}${again}, skipped ${report.skipped}${why}, failed ${report.failed}${duplicates}`;
  const unseen = report.unseen ? `\n${report.unseen}` : '';
  const stopped = report.interrupted
    ? '\ninterrupted: the letters not reached stay in the DLQ as they were; run the redrive again for them'
    : '';
  return `${table}\n\n${summary}; ${report.notMatched} other dead letter${report.notMatched === 1 ? '' : 's'} left alone${unseen}${stopped}`;
}

/** The preview shown before a redrive's confirmation: the dead jobs the filter finds, the first rows. */
export function describeRedrivePreview(preview: RedrivePreview, now: number): string {
  if (preview.count === 0) {
    return 'no dead job in the problems index matches (a letter with no job item, invalid-* or sqs-max-receives, is not there: --dry-run lists the letters)';
  }
  const table = renderTable(
    [
      { header: 'DEDUP KEY', max: 40 },
      { header: 'TYPE' },
      { header: 'REASON' },
      { header: 'ATTEMPTS', align: 'right' },
      { header: 'ERROR', max: 60 },
      { header: 'DEAD' },
    ],
    preview.jobs.map((j) => [
      j.dedupKey,
      j.type ?? '',
      j.deadReason ?? '',
      String(j.attempts),
      formatErrorText(j.lastErrorClass, j.lastError) ?? '',
      formatRelative(j.deadAt ?? j.problemAt, now),
    ]),
  );
  const rest =
    preview.count > preview.jobs.length
      ? `\n… and ${preview.count - preview.jobs.length}${preview.more ? '+' : ''} more`
      : '';
  return `${table}${rest}\n\n${preview.count}${preview.more ? '+' : ''} dead job${preview.count === 1 ? '' : 's'} match in the problems index (${preview.readUnits} RCU); the redrive sends their letters`;
}

/** The letter filter of the flags; a bad one is refused before anything is touched. */
export function redriveFilter(flags: RedriveFlags, now = Date.now()): DeadLetterFilter {
  if (flags.reason !== undefined) assertKnownReason(flags.reason);
  if (flags.errorMatch !== undefined && flags.errorMatch.trim() === '') {
    throw new OpsError('--error-match is empty: give the text the error contains');
  }
  if (flags.actor !== undefined) checkActor(flags.actor);
  return {
    ...(flags.type === undefined ? {} : { type: flags.type }),
    ...(flags.reason === undefined ? {} : { reason: flags.reason }),
    ...(flags.dedupKey === undefined ? {} : { dedupKey: flags.dedupKey }),
    ...(flags.errorMatch === undefined ? {} : { errorContains: flags.errorMatch }),
    ...(flags.since === undefined ? {} : { since: now - flags.since }),
  };
}

/** The preview before the confirmation, on stderr; a table without the index previews nothing (said). */
async function notePreview(target: Target, filter: DeadLetterFilter): Promise<void> {
  try {
    const preview = await previewRedrive(target, filter);
    note(describeRedrivePreview(preview, Date.now()).replaceAll('\n', '\n  '));
  } catch (error) {
    if (!(error instanceof ProblemsIndexMissingError)) throw error;
    note(`no preview: ${error.message}; --dry-run lists what would be redriven`);
  }
}

/** Adds `leaseq dlq redrive` to the `dlq` command. */
export function registerRedrive(dlq: Command): void {
  targetOptions(
    jobModuleOption(dlq.command('redrive'))
      .description(
        'send dead letters back to the jobs queue: resets each DEAD job item (attempts 0) so it can run, sends ' +
          'the original body, then deletes the dead letter. Skips jobs that completed or are running',
      )
      .option('--type <type>', 'only jobs of this type')
      .option('--reason <reason>', 'only this reason (exact, or a prefix ending in *, e.g. invalid-*)')
      .option('--dedup-key <key>', 'only the job with this dedup key')
      .option('--error-match <text>', 'only letters whose error (class or message) contains this, any case')
      .option('--since <duration>', 'only letters dead within this long (e.g. 2h, 30m)', durationArg)
      .option('--dry-run', 'list what would be redriven; change nothing')
      .option(
        '--include-invalid',
        'also send letters whose body can only be refused again (invalid-not-json, invalid-bad-schema, invalid-too-large, dedup-key-collision)',
      )
      .option(
        '--rate <rate>',
        `at most this many messages per second (5, 5/s, 300/min; default ${BULK_DEFAULT_RATE})`,
        rateArg,
      )
      .option('--limit <n>', 'redrive at most this many', integerArg(1, 1_000_000))
      .option(
        '--payload-file <file>',
        "edit and retry: send the job with the JSON payload in this file instead of the dead one (same dedup key and type; needs --dedup-key). Checked against the type's schema in the job module first",
      )
      .option(
        '--actor <name>',
        'who acts, for the job history (default: the STS caller on AWS, else user@host)',
      )
      .option('--json', 'print the report as JSON on stdout')
      .option('--yes', 'do not ask (scripts, CI); without a terminal a redrive refuses without it'),
  ).action(async (flags: RedriveFlags) => {
    const filter = redriveFilter(flags);
    const edited =
      flags.payloadFile === undefined ? undefined : readPayloadFile(flags.payloadFile, flags.dedupKey);
    const payload = edited ? { ...edited, ...(await schemaCheck(flags.jobModule)) } : undefined;
    const target = await resolveTarget(flags);
    try {
      // A redrive resets dead jobs and runs them again: it says where and asks (a dry run changes nothing).
      if (!flags.dryRun) {
        // Shown to whoever is asked, before the question (with --yes after the line saying where); a
        // refusal for want of a terminal stays one line.
        if (!flags.yes && isInteractive()) await notePreview(target, filter);
        const dlqName = queueName(target.names.dlqUrl);
        const confirmed = await confirmChange(
          {
            verb: 'redrive',
            name: dlqName,
            what: `dead letters of ${dlqName} back to ${queueName(target.names.queueUrl)}, their jobs reset to run again in table ${target.names.jobsTable}`,
            local: target.local,
          },
          flags.yes,
        );
        if (!confirmed) {
          process.exitCode = 1;
          return;
        }
        if (flags.yes) await notePreview(target, filter);
      }
      const by = await resolveActor(flags.actor, target);
      const report = await stoppable((signal) =>
        redrive(target, {
          filter,
          dryRun: flags.dryRun ?? false,
          includeHopeless: flags.includeInvalid ?? false,
          by,
          signal,
          ...(payload ? { payload } : {}),
          ratePerSecond: flags.rate ?? BULK_DEFAULT_RATE,
          ...(flags.limit === undefined ? {} : { limit: flags.limit }),
          ...(flags.json || !process.stderr.isTTY
            ? {}
            : { onProgress: (item) => note(`${item.outcome} ${item.dedupKey ?? item.messageId}`) }),
        }),
      );
      if (flags.json) printJson(report);
      else print(describeRedrive(report));
      if (report.failed > 0) process.exitCode = 1;
      if (report.interrupted) process.exitCode = EXIT_INTERRUPTED;
    } finally {
      target.close();
    }
  });
}
