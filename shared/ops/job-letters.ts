/**
 * Between a job and its dead letters, for the inspector: the letters of one job (a browse of the DLQ,
 * dlq-browse.ts: each letter is hidden while the browse runs and made visible again at its end), and
 * what became of the job of each listed letter since it died (one BatchGetItem per 100 keys).
 */
import { getJobStates, type JobStateItem } from '../core/adapters/dynamodb-job-batch.ts';
import type { JobItem } from '../core/contract/job-item.ts';
import { JobStatus } from '../core/contract/statuses.ts';
import { browse, KEEP, shortfall } from './dlq-browse.ts';
import { type DeadLetter, type DeadLetterSummary, toDeadLetter } from './dlq-letters.ts';
import { letterFacts, letterOwner } from './dlq-redrive-plan.ts';
import type { OpsTarget } from './target.ts';

/**
 * How long the letters a job's browse receives stay hidden if it never ends (killed): a browse that ends
 * makes them visible at once. Short: a letter hidden is one a redrive or another operator cannot see.
 */
export const JOB_LETTERS_VISIBILITY_SECONDS = 20;

export interface JobLetters {
  /** Oldest death first, with bodies and attributes. */
  readonly letters: DeadLetter[];
  /** Why the browse may have missed some (fewer seen than the DLQ held), when it did. */
  readonly shortfall?: string;
}

/** The dead letters whose dedup key is `dedupKey`, from a browse of at most `limit` letters. */
export async function lettersOfJob(
  target: OpsTarget,
  dedupKey: string,
  options: { readonly limit?: number } = {},
): Promise<JobLetters> {
  const letters: DeadLetter[] = [];
  const result = await browse(
    target.clients.sqs,
    target.names.dlqUrl,
    { visibilitySeconds: JOB_LETTERS_VISIBILITY_SECONDS, limit: options.limit ?? 500 },
    async (message) => {
      const letter = toDeadLetter(message);
      if (letter.dedupKey === dedupKey) letters.push(letter);
      return KEEP;
    },
  );
  letters.sort((a, b) => (a.deadAt ?? '').localeCompare(b.deadAt ?? ''));
  const missed = shortfall(result);
  return { letters, ...(missed ? { shortfall: missed } : {}) };
}

/**
 * What became of a letter's job since the letter: `completed`, `cancelled`; `reset` when a redrive or a
 * fresh send reset the job (it waits, runs or is another job now); `died-again` when the job was claimed
 * since by another message (this is not its newest death); `no-job` when no item is under the key (never
 * claimed, or removed by TTL); `unread` when its item could not be read. Absent: the letter is its job's
 * death, still DEAD.
 */
export type LetterMark = 'completed' | 'cancelled' | 'reset' | 'died-again' | 'no-job' | 'unread';

/** Pure: the mark of a letter given its job's item. */
export function letterMark(
  letter: DeadLetterSummary,
  item: JobStateItem | undefined,
): LetterMark | undefined {
  if (!item) return 'no-job';
  if (item.status === JobStatus.Completed) return 'completed';
  if (item.status === JobStatus.Cancelled) return 'cancelled';
  const facts = letterFacts({ ...letter, body: '', attributes: {}, systemAttributes: {} });
  const owner = letterOwner(item as JobItem, facts);
  if (owner === 'newer-job') return 'reset';
  if (owner === 'other' && letter.attempts !== 0) return 'died-again';
  return item.status === JobStatus.Dead ? undefined : 'reset';
}

/** The marks of `letters`, by DLQ message id (unmarked letters are absent), and the job items read. */
export async function markLetters(
  target: OpsTarget,
  letters: readonly DeadLetterSummary[],
): Promise<{ marks: Map<string, LetterMark>; items: Map<string, JobStateItem> }> {
  const keys = letters.flatMap((l) => (l.dedupKey ? [l.dedupKey] : []));
  const { items, unread } = await getJobStates(target.clients.doc, target.names.jobsTable, keys);
  const skipped = new Set(unread);
  const marks = new Map<string, LetterMark>();
  for (const letter of letters) {
    if (!letter.dedupKey) continue;
    const mark = skipped.has(letter.dedupKey) ? 'unread' : letterMark(letter, items.get(letter.dedupKey));
    if (mark) marks.set(letter.messageId, mark);
  }
  return { marks, items };
}

/** How the dead-letters page words a mark. */
export const LETTER_MARK_TEXT: Readonly<Record<LetterMark, string>> = {
  completed: 'job completed since',
  cancelled: 'job cancelled since',
  reset: 'job reset since',
  'died-again': 'job died again since (not its newest letter)',
  'no-job': 'no job item (never claimed, or removed by TTL)',
  unread: 'job not read (throttled)',
};
