import type { Command } from 'commander';
import { findDeadLetter, purgeDlq, purgeLetters, surveyDeadLetters } from '../../shared/ops/dlq.ts';
import { shortfall } from '../../shared/ops/dlq-browse.ts';
import { type DeadJobSummary, type DeadJobsResult, listDeadJobs } from '../../shared/ops/dlq-jobs.ts';
import type { DeadLetter, DeadLetterSummary } from '../../shared/ops/dlq-letters.ts';
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
  renderFields,
  renderTable,
} from '../format.ts';
import { safeJson, safeLines, safeText } from '../safe-text.ts';
import { resolveTarget, type TargetFlags, targetOptions } from '../target.ts';
import { registerRedrive } from './dlq-redrive.ts';
import { queueName } from './status.ts';

export { describeRedrive } from './dlq-redrive.ts';

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

  registerRedrive(dlq);

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
