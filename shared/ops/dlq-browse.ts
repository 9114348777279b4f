/**
 * Walking a DLQ without consuming it. SQS has no "peek", so browsing receives messages, keeps them
 * hidden while the walk runs and makes them visible again at the end; `list`, `show` and `redrive`
 * all look at letters through it.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { isFifoQueue } from '../aws/queue-url.ts';
import { queueStats } from './queue-stats.ts';

/** What a visitor did with a browsed message: `deleted` ones are not released; `stop` ends the browse. */
export interface Visit {
  readonly deleted?: boolean;
  readonly stop?: boolean;
}
/** Leave the message in the DLQ and go on. */
export const KEEP: Visit = {};

export interface BrowseOptions {
  readonly limit?: number;
  /** How long browsed messages stay hidden while the browse runs. */
  readonly visibilitySeconds: number;
}

/** What a browse saw, next to what the queue held when it began. */
export interface BrowseResult {
  /** Distinct messages received. */
  readonly seen: number;
  /** ApproximateNumberOfMessages + ApproximateNumberOfMessagesNotVisible before the first receive. */
  readonly depth: number;
  readonly fifo: boolean;
}

/**
 * Walks the DLQ: receives pages (each received message stays hidden so the next page shows others),
 * hands each new message to `visit`, and finally makes every kept message visible again at once
 * (ChangeMessageVisibility 0). Ends when a 1 s long poll brings nothing new, at `limit`, or when
 * `visit` says stop.
 *
 * The trade-off: SQS has no "peek". While a browse runs, the messages it holds are invisible to other
 * readers of the DLQ and their receive count grows by one; nothing consumes the DLQ automatically, so
 * this costs nothing but that count. A browse that is killed leaves them hidden for `visibilitySeconds`.
 *
 * FIFO: a held letter blocks the letters behind it in its group, and a released one is received again
 * before them, so only deleting the letters at a group's head shows more of it. After a page in which
 * `visit` deleted letters of a group, the browse releases the letters of that group it keeps (so the
 * next page brings them back with the ones behind); a group of which it deleted none stays held, so
 * the next page can show other groups. A group whose first 10 letters are all kept shows no more:
 * `seen` below `depth` tells the caller.
 */
export async function browse(
  sqs: SQSClient,
  queueUrl: string,
  options: BrowseOptions,
  visit: (message: Message) => Promise<Visit>,
): Promise<BrowseResult> {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const fifo = isFifoQueue(queueUrl);
  const stats = await queueStats(sqs, queueUrl);
  const depth = stats.visible + stats.inFlight;
  const seen = new Set<string>();
  const held = new Map<string, string>();
  const gone = new Set<string>();
  const groups = new Map<string, string>();
  try {
    let stop = false;
    let stalePages = 0;
    while (!stop && seen.size < limit) {
      const out = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: Math.min(10, limit - seen.size),
          WaitTimeSeconds: 1,
          VisibilityTimeout: options.visibilitySeconds,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      let fresh = 0;
      const advanced = new Set<string>();
      for (const message of out.Messages ?? []) {
        const id = message.MessageId ?? '';
        const handle = message.ReceiptHandle ?? '';
        if (seen.has(id)) {
          // Released (FIFO) or its visibility lapsed on a long browse: hold the newest receipt handle.
          if (!gone.has(id)) held.set(id, handle);
          continue;
        }
        seen.add(id);
        fresh += 1;
        const group = message.Attributes?.MessageGroupId;
        if (fifo && group !== undefined) groups.set(id, group);
        if (stop) {
          held.set(id, handle);
          continue;
        }
        const decision = await visit(message);
        if (decision.deleted) {
          gone.add(id);
          if (group !== undefined) advanced.add(group);
        } else {
          held.set(id, handle);
        }
        if (decision.stop) stop = true;
      }
      if (fifo && advanced.size > 0 && !stop) await releaseGroups(sqs, queueUrl, held, groups, advanced);
      // An empty page means the queue has nothing more to show. A page of letters seen before (their
      // browse visibility lapsed on a long run) does not: look a few pages further before giving up.
      if ((out.Messages ?? []).length === 0) break;
      stalePages = fresh === 0 ? stalePages + 1 : 0;
      if (stalePages >= 3) break;
    }
  } finally {
    await release(sqs, queueUrl, [...held.values()]);
  }
  return { seen: seen.size, depth, fifo };
}

/** Releases the held letters of `advanced` groups (FIFO) so the next page shows who follows them. */
async function releaseGroups(
  sqs: SQSClient,
  queueUrl: string,
  held: Map<string, string>,
  groups: ReadonlyMap<string, string>,
  advanced: ReadonlySet<string>,
): Promise<void> {
  const blocking = [...held].filter(([id]) => advanced.has(groups.get(id) ?? ''));
  for (const [id] of blocking) held.delete(id);
  await release(
    sqs,
    queueUrl,
    blocking.map(([, handle]) => handle),
  );
}

/**
 * What a caller tells the operator when a browse saw fewer letters than the queue held (undefined when
 * it saw them all): how many, and why that happens on this kind of queue.
 */
export function shortfall(result: BrowseResult, holder = 'the DLQ'): string | undefined {
  if (result.seen >= result.depth) return undefined;
  const why = result.fifo
    ? 'SQS shows only the first 10 letters of a FIFO group until they are deleted (redrive or purge those to reach the rest)'
    : "another reader holds the rest, or SQS's approximate count lags";
  return `saw ${result.seen} of the ${result.depth} letters ${holder} holds; ${why}`;
}

/** Makes received messages visible again now. Failures only delay them until their visibility ends. */
async function release(sqs: SQSClient, queueUrl: string, handles: readonly string[]): Promise<void> {
  for (let i = 0; i < handles.length; i += 10) {
    const page = handles.slice(i, i + 10);
    try {
      await sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: page.map((handle, j) => ({ Id: String(j), ReceiptHandle: handle, VisibilityTimeout: 0 })),
        }),
      );
    } catch {
      // They reappear when the browse visibility ends; nothing is lost.
    }
  }
}
