import type { Command } from 'commander';
import { findDeadLetter, purgeDlq, purgeLetters, surveyDeadLetters } from '../../shared/ops/dlq.ts';
import { shortfall } from '../../shared/ops/dlq-browse.ts';
import { type DeadJobSummary, type DeadJobsResult, listDeadJobs } from '../../shared/ops/dlq-jobs.ts';
import { assertKnownReason, type DeadLetter, type DeadLetterSummary } from '../../shared/ops/dlq-letters.ts';
import { type RedriveReport, redrive } from '../../shared/ops/dlq-redrive.ts';
import { OpsError } from '../../shared/ops/ops-errors.ts';
import { PROBLEM_JOBS_MAX_LIMIT, ProblemsIndexMissingError } from '../../shared/ops/problem-jobs.ts';
import { queueStats, totalDepth } from '../../shared/ops/queue-stats.ts';
import { confirmChange } from '../confirm.ts';
import {
  cutBytes,
  fitToTerminal,
  formatErrorText,
  formatInstant,
  integerArg,
  note,
  print,
  printJson,
  rateArg,
  renderFields,
  renderTable,
} from '../format.ts';
import { jobModuleOption } from '../job-module.ts';
import { safeJson, safeLines, safeText } from '../safe-text.ts';
import { resolveTarget, type TargetFlags, targetOptions } from '../target.ts';
import { operatorIdentity, readPayloadFile, schemaCheck } from './redrive-input.ts';
import { queueName } from './status.ts';

interface ListFlags extends TargetFlags {
  readonly limit?: number;
  readonly cursor?: string;
  readonly letters?: boolean;
  readonly json?: boolean;
}

interface ShowFlags extends TargetFlags {
  readonly full?: boolean;
  readonly json?: boolean;
}

/** What `dlq show` prints of a body unless `--full`: enough to recognise it, not a screenful of payload. */
export const SHOW_BODY_BYTES = 2048;

/** Widest error cell off a terminal (on one, the line is cut to the terminal's width). */
const ERROR_COLUMN_MAX = 100;

interface RedriveFlags extends TargetFlags {
  readonly type?: string;
  readonly reason?: string;
  readonly dedupKey?: string;
  readonly dryRun?: boolean;
  readonly includeInvalid?: boolean;
  readonly rate?: number;
  readonly limit?: number;
  readonly json?: boolean;
  readonly yes?: boolean;
}

interface PurgeFlags extends TargetFlags {
  readonly messageId?: string[];
  readonly yes?: boolean;
  readonly json?: boolean;
}

const DEFAULT_LIST_LIMIT = 100;

/** What a list or view shows for a hint field: the value, `(unreadable)` when a bad body's text was dropped. */
function hintText(letter: DeadLetterSummary, field: 'dedupKey' | 'type'): string | undefined {
  return letter[field] ?? (letter.unreadable?.includes(field) ? '(unreadable)' : undefined);
}

/** The human table of dead letters. */
export function describeDeadLetters(letters: readonly DeadLetterSummary[], now: number): string {
  if (letters.length === 0) return 'the DLQ is empty';
  return renderTable(
    [
      { header: 'MESSAGE ID', max: 36 },
      { header: 'DEDUP KEY', max: 40 },
      { header: 'TYPE' },
      { header: 'REASON' },
      { header: 'ATTEMPTS', align: 'right' },
      { header: 'WORKER', max: 30 },
      { header: 'DEAD AT' },
      { header: 'ERROR', max: ERROR_COLUMN_MAX },
    ],
    letters.map((l) => [
      l.messageId,
      hintText(l, 'dedupKey') ?? '',
      hintText(l, 'type') ?? '',
      l.reason,
      l.attempts === undefined ? '' : String(l.attempts),
      l.worker ?? '',
      formatInstant(l.deadAt, now) ?? '',
      formatErrorText(l.errorClass, l.errorMessage) ?? '',
    ]),
  );
}

/** The human table of dead jobs (from the problems index): the error last, so it can take the rest. */
export function describeDeadJobs(jobs: readonly DeadJobSummary[], now: number): string {
  if (jobs.length === 0) return 'no dead jobs';
  return renderTable(
    [
      { header: 'DEDUP KEY', max: 40 },
      { header: 'TYPE' },
      { header: 'REASON' },
      { header: 'ATTEMPTS', align: 'right' },
      { header: 'DEAD AT' },
      { header: 'ERROR', max: ERROR_COLUMN_MAX },
    ],
    jobs.map((j) => [
      j.dedupKey,
      j.type ?? '',
      j.reason,
      String(j.attempts),
      formatInstant(j.deadAt, now) ?? '',
      formatErrorText(j.errorClass, j.errorMessage) ?? '',
    ]),
  );
}

/**
 * What the dead jobs listing leaves out, next to the DLQ's depth (read without receiving a letter): a
 * letter of a body that never became a job, or a dead job whose letter was purged, is in one only.
 */
function deadJobsNotes(result: DeadJobsResult, limit: number, dlqDepth: number): string[] {
  if (result.next) {
    return [`showing the newest ${limit} dead jobs; more: leaseq dlq list --cursor ${result.next}`];
  }
  if (dlqDepth === result.jobs.length) return [];
  return [
    `${result.jobs.length} dead job${result.jobs.length === 1 ? '' : 's'} in the jobs table, ${dlqDepth} letter${dlqDepth === 1 ? '' : 's'} in the DLQ: ` +
      'a letter whose body never became a job (invalid-*, dedup-key-collision, sqs-max-receives) has no DEAD item, ' +
      'and a purged letter leaves its job DEAD; `leaseq dlq list --letters` lists the letters',
  ];
}

/**
 * The human view of one dead letter: its reason, then its body (pretty-printed when it is JSON). Every
 * value is escaped (safe-text.ts); a non-JSON body keeps its newlines, nothing else raw.
 */
export function describeDeadLetter(letter: DeadLetter, now: number, full = true): string {
  let shown: string;
  try {
    shown = safeJson(JSON.parse(letter.body), 2);
  } catch {
    // Not JSON (that may be why it is here): show it as it is, escaped.
    shown = safeLines(letter.body);
  }
  let body = shown;
  if (!full) {
    const cut = cutBytes(shown, SHOW_BODY_BYTES);
    if (cut.shownBytes < cut.totalBytes) {
      body =
        `${cut.text}\n… ${cut.totalBytes - cut.shownBytes} more bytes of the body not shown ` +
        `(${cut.shownBytes} of ${cut.totalBytes} shown); --full shows all`;
    }
  }
  const fields = renderFields([
    ['message id', letter.messageId],
    ['dedup key', hintText(letter, 'dedupKey')],
    ['type', hintText(letter, 'type')],
    ['reason', letter.reason],
    ['error', formatErrorText(letter.errorClass, letter.errorMessage)],
    ['attempts', letter.attempts === undefined ? undefined : String(letter.attempts)],
    ['worker', letter.worker],
    ['dead at', formatInstant(letter.deadAt, now)],
    ['original message', letter.originalMessageId],
    ['received', letter.receiveCount === undefined ? undefined : `${letter.receiveCount} times from the DLQ`],
  ]);
  const attributes = Object.entries(letter.attributes)
    .map(([k, v]) => `  leaseq.${safeText(k)} = ${safeText(v)}`)
    .join('\n');
  return `${fields}\n\nattributes:\n${attributes || '  (none: moved by the queue redrive policy)'}\n\nbody:\n${body}`;
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
  return `${table}\n\n${summary}; ${report.notMatched} other dead letter${report.notMatched === 1 ? '' : 's'} left alone${unseen}`;
}

/** Adds `leaseq dlq list | show | redrive | purge`. */
export function register(program: Command): void {
  const dlq = program.command('dlq').description('the dead-letter queue: list, show, redrive, purge');

  targetOptions(
    dlq
      .command('list')
      .description(
        "list the dead jobs with their reason and error (no bodies), newest first, from the jobs table's " +
          'problems index: no letter is received. --letters lists the letters themselves instead',
      )
      .option(
        '--limit <n>',
        `list at most this many (default ${DEFAULT_LIST_LIMIT}; above ${PROBLEM_JOBS_MAX_LIMIT} with --letters only)`,
        integerArg(1, 100_000),
      )
      .option('--cursor <cursor>', 'continue a listing of dead jobs where it stopped (printed as `more:`)')
      .option(
        '--letters',
        'list the DLQ letters (message id, worker, receive count; also letters with no job item). SQS cannot ' +
          'peek: they are received, hidden while the list runs, then made visible again at once; each listing ' +
          'adds one to their receive count',
      )
      .option('--json', 'print the dead jobs (or letters) as a JSON array on stdout'),
  ).action(async (flags: ListFlags) => {
    const limit = flags.limit ?? DEFAULT_LIST_LIMIT;
    if (flags.letters && flags.cursor !== undefined) {
      throw new OpsError('--cursor continues a listing of dead jobs; --letters has none (raise --limit)');
    }
    if (!flags.letters && limit > PROBLEM_JOBS_MAX_LIMIT) {
      throw new OpsError(
        `--limit above ${PROBLEM_JOBS_MAX_LIMIT} lists letters only: pass --letters, or page with --cursor`,
      );
    }
    const target = await resolveTarget(flags);
    try {
      if (!flags.letters) {
        try {
          const result = await listDeadJobs(target, {
            limit,
            ...(flags.cursor === undefined ? {} : { cursor: flags.cursor }),
          });
          const depth = totalDepth(await queueStats(target.clients.sqs, target.names.dlqUrl));
          if (flags.json) printJson(result.jobs);
          else print(fitToTerminal(describeDeadJobs(result.jobs, Date.now())));
          for (const line of deadJobsNotes(result, limit, depth)) note(line);
          return;
        } catch (error) {
          if (!(error instanceof ProblemsIndexMissingError)) throw error;
          note(`${error.message}; listing by receiving the letters instead`);
        }
      }
      const survey = await surveyDeadLetters(target.clients.sqs, target.names.dlqUrl, { limit });
      const { letters } = survey;
      if (flags.json) printJson(letters);
      else print(fitToTerminal(describeDeadLetters(letters, Date.now())));
      // On stderr in both modes, so the JSON stays an array of letters and a script still hears it.
      if (letters.length >= limit) note(`showing the first ${limit}; pass --limit to see more`);
      else {
        const unseen = shortfall(survey);
        if (unseen) note(unseen);
      }
    } finally {
      target.close();
    }
  });

  targetOptions(
    dlq
      .command('show')
      .description(
        `one dead letter: its reason attributes and its body (which holds the job payload; the first ${SHOW_BODY_BYTES} bytes unless --full)`,
      )
      .argument('<id>', 'the DLQ message id (from `leaseq dlq list --letters`), or a dedup key')
      .option('--full', 'print the whole body')
      .option('--json', 'print the dead letter, whole body included, as JSON on stdout'),
  ).action(async (id: string, flags: ShowFlags) => {
    const target = await resolveTarget(flags);
    try {
      const letter = await findDeadLetter(target.clients.sqs, target.names.dlqUrl, id);
      if (flags.json) printJson(letter);
      else print(describeDeadLetter(letter, Date.now(), flags.full ?? false));
    } finally {
      target.close();
    }
  });

  targetOptions(
    jobModuleOption(dlq.command('redrive'))
      .description(
        'send dead letters back to the jobs queue: resets each DEAD job item (attempts 0) so it can run, sends ' +
          'the original body, then deletes the dead letter. Skips jobs that completed or are running',
      )
      .option('--type <type>', 'only jobs of this type')
      .option('--reason <reason>', 'only this reason (exact, or a prefix ending in *, e.g. invalid-*)')
      .option('--dedup-key <key>', 'only the job with this dedup key')
      .option('--dry-run', 'list what would be redriven; change nothing')
      .option(
        '--include-invalid',
        'also send letters whose body can only be refused again (invalid-not-json, invalid-bad-schema, invalid-too-large, dedup-key-collision)',
      )
      .option('--rate <rate>', 'at most this many messages per second (5, 5/s, 300/min)', rateArg)
      .option('--limit <n>', 'redrive at most this many', integerArg(1, 1_000_000))
      .option(
        '--payload-file <file>',
        "edit and retry: send the job with the JSON payload in this file instead of the dead one (same dedup key and type; needs --dedup-key). Checked against the type's schema in the job module first",
      )
      .option('--json', 'print the report as JSON on stdout')
      .option('--yes', 'do not ask (scripts, CI); without a terminal a redrive refuses without it'),
  ).action(async (flags: RedriveFlags & { payloadFile?: string; jobModule?: string }) => {
    if (flags.reason !== undefined) assertKnownReason(flags.reason);
    const edited =
      flags.payloadFile === undefined ? undefined : readPayloadFile(flags.payloadFile, flags.dedupKey);
    const payload = edited ? { ...edited, ...(await schemaCheck(flags.jobModule)) } : undefined;
    const target = await resolveTarget(flags);
    try {
      // A redrive resets dead jobs and runs them again: it says where and asks (a dry run changes nothing).
      if (!flags.dryRun) {
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
      }
      const report = await redrive(target, {
        filter: {
          ...(flags.type === undefined ? {} : { type: flags.type }),
          ...(flags.reason === undefined ? {} : { reason: flags.reason }),
          ...(flags.dedupKey === undefined ? {} : { dedupKey: flags.dedupKey }),
        },
        dryRun: flags.dryRun ?? false,
        includeHopeless: flags.includeInvalid ?? false,
        by: operatorIdentity(),
        ...(payload ? { payload } : {}),
        ...(flags.rate === undefined ? {} : { ratePerSecond: flags.rate }),
        ...(flags.limit === undefined ? {} : { limit: flags.limit }),
        ...(flags.json || !process.stderr.isTTY
          ? {}
          : { onProgress: (item) => note(`${item.outcome} ${item.dedupKey ?? item.messageId}`) }),
      });
      if (flags.json) printJson(report);
      else print(describeRedrive(report));
      if (report.failed > 0) process.exitCode = 1;
    } finally {
      target.close();
    }
  });

  targetOptions(
    dlq
      .command('purge')
      .description(
        'delete every message in the DLQ, or the letters named (asks first on a terminal; --yes for scripts)',
      )
      .option(
        '--message-id <id...>',
        'delete only these letters (their DLQ message ids, from dlq list --letters)',
      )
      .option('--yes', 'do not ask (scripts, CI); without a terminal a purge refuses without it')
      .option('--json', 'print the result as JSON on stdout'),
  ).action(async (flags: PurgeFlags) => {
    const target = await resolveTarget(flags);
    try {
      const name = queueName(target.names.dlqUrl);
      if (flags.messageId) {
        await purgeNamed(target, name, flags.messageId, flags);
        return;
      }
      const depth = totalDepth(await queueStats(target.clients.sqs, target.names.dlqUrl));
      const confirmed = await confirmChange(
        {
          verb: 'purge',
          name,
          what: `delete all ${depth} messages in ${name}; this cannot be undone`,
          local: target.local,
        },
        flags.yes,
      );
      if (!confirmed) {
        process.exitCode = 1;
        return;
      }
      const report = await purgeDlq(target.clients.sqs, target.names.dlqUrl);
      if (flags.json) printJson(report);
      else {
        print(
          `deleted ${report.deleted} message${report.deleted === 1 ? '' : 's'} from ${name}` +
            (report.remaining > 0 ? `; ${report.remaining} remain (in flight elsewhere, or new)` : ''),
        );
      }
    } finally {
      target.close();
    }
  });
}

/** `dlq purge --message-id`: deletes the named letters only, after the same confirmation. */
async function purgeNamed(
  target: Awaited<ReturnType<typeof resolveTarget>>,
  name: string,
  ids: readonly string[],
  flags: PurgeFlags,
): Promise<void> {
  const what = `delete ${ids.length === 1 ? `letter ${ids[0]}` : `${ids.length} letters`} from ${name}; this cannot be undone`;
  if (!(await confirmChange({ verb: 'purge', name, what, local: target.local }, flags.yes))) {
    process.exitCode = 1;
    return;
  }
  const report = await purgeLetters(target.clients.sqs, target.names.dlqUrl, ids);
  if (flags.json) printJson(report);
  else {
    const missing = report.notFound.length > 0 ? `; not found: ${report.notFound.join(', ')}` : '';
    print(`deleted ${report.deleted} letter${report.deleted === 1 ? '' : 's'}${missing}`);
  }
}
