/**
 * The DLQ commands that look at or empty the dead-letter queue: list, show (find one) and purge (all, or
 * the letters named).
 * Redrive, which sends letters back, is in dlq-redrive.ts; decoding a letter is in dlq-letters.ts.
 */
import {
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { type BrowseResult, browse, KEEP, shortfall } from './dlq-browse.ts';
import { type DeadLetter, type DeadLetterSummary, summarise, toDeadLetter } from './dlq-letters.ts';
import { DeadLetterNotFoundError } from './ops-errors.ts';
import { queueStats, totalDepth } from './queue-stats.ts';

const BROWSE_VISIBILITY_SECONDS = 30;

/** Lists dead letters (without bodies), oldest first. See {@link browse} for what listing costs. */
export async function listDeadLetters(
  sqs: SQSClient,
  dlqUrl: string,
  options: { readonly limit?: number } = {},
): Promise<DeadLetterSummary[]> {
  return (await surveyDeadLetters(sqs, dlqUrl, options)).letters;
}

/** {@link listDeadLetters}, with what the browse saw next to the DLQ's depth. */
export interface DeadLetterSurvey extends BrowseResult {
  readonly letters: DeadLetterSummary[];
}

/** Lists dead letters like {@link listDeadLetters} and says how many of the DLQ's letters it saw. */
export async function surveyDeadLetters(
  sqs: SQSClient,
  dlqUrl: string,
  options: { readonly limit?: number } = {},
): Promise<DeadLetterSurvey> {
  const letters: DeadLetterSummary[] = [];
  const result = await browse(
    sqs,
    dlqUrl,
    { visibilitySeconds: BROWSE_VISIBILITY_SECONDS, ...(options.limit ? { limit: options.limit } : {}) },
    async (message) => {
      letters.push(summarise(toDeadLetter(message)));
      return KEEP;
    },
  );
  letters.sort((a, b) => (a.deadAt ?? '').localeCompare(b.deadAt ?? ''));
  return { ...result, letters };
}

/**
 * Finds one dead letter by its DLQ message id, or else by dedup key, with its body and attributes.
 * @throws DeadLetterNotFoundError when no message matches (saying so when the browse saw fewer letters than
 *   the DLQ holds: a FIFO group hides letters behind its first 10).
 */
export async function findDeadLetter(sqs: SQSClient, dlqUrl: string, id: string): Promise<DeadLetter> {
  let byId: DeadLetter | undefined;
  let byKey: DeadLetter | undefined;
  const result = await browse(
    sqs,
    dlqUrl,
    { visibilitySeconds: BROWSE_VISIBILITY_SECONDS },
    async (message) => {
      const letter = toDeadLetter(message);
      if (letter.messageId === id) {
        byId = letter;
        return { stop: true };
      }
      if (!byKey && letter.dedupKey === id) byKey = letter;
      return KEEP;
    },
  );
  const found = byId ?? byKey;
  if (!found) throw new DeadLetterNotFoundError(id, shortfall(result, 'it'));
  return found;
}

/** Result of {@link purgeDlq}. */
export interface PurgeReport {
  readonly deleted: number;
  /** What SQS still counts afterwards (messages another reader held hidden, or that arrived meanwhile). */
  readonly remaining: number;
}

/**
 * Deletes every message it can receive from the DLQ. It receives and deletes in pages instead of calling
 * PurgeQueue: that gives an exact count, takes effect at once (PurgeQueue may take 60 s) and is not
 * limited to once a minute. DLQs are small by nature; for a huge one PurgeQueue would be faster.
 */
export async function purgeDlq(sqs: SQSClient, dlqUrl: string): Promise<PurgeReport> {
  let deleted = 0;
  for (;;) {
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: dlqUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: 30,
      }),
    );
    const messages = out.Messages ?? [];
    if (messages.length === 0) break;
    const del = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: dlqUrl,
        Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? '' })),
      }),
    );
    deleted += del.Successful?.length ?? 0;
  }
  return { deleted, remaining: totalDepth(await queueStats(sqs, dlqUrl)) };
}

/** Result of {@link purgeLetters}. */
export interface PurgeLettersReport {
  readonly deleted: number;
  /** The named letters the browse did not find (gone already, or held hidden by another reader). */
  readonly notFound: string[];
}

/**
 * Deletes the letters named by their message ids, and no other: a stale letter a redrive skipped goes
 * while the other dead jobs keep theirs. The browse ends once it saw every named letter.
 */
export async function purgeLetters(
  sqs: SQSClient,
  dlqUrl: string,
  messageIds: readonly string[],
): Promise<PurgeLettersReport> {
  const wanted = new Set(messageIds);
  let deleted = 0;
  await browse(sqs, dlqUrl, { visibilitySeconds: BROWSE_VISIBILITY_SECONDS }, async (message) => {
    const id = message.MessageId ?? '';
    if (!wanted.has(id)) return KEEP;
    wanted.delete(id);
    await sqs.send(
      new DeleteMessageCommand({ QueueUrl: dlqUrl, ReceiptHandle: message.ReceiptHandle ?? '' }),
    );
    deleted += 1;
    return { deleted: true, stop: wanted.size === 0 };
  });
  return { deleted, notFound: [...wanted] };
}
