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

/**
 * Walks the DLQ: receives pages (each received message stays hidden so the next page shows others),
 * hands each new message to `visit`, and finally makes every kept message visible again at once
 * (ChangeMessageVisibility 0). Ends when a 1 s long poll brings nothing new, at `limit`, or when
 * `visit` says stop.
 *
 * The trade-off: SQS has no "peek". While a browse runs, the messages it holds are invisible to other
 * readers of the DLQ and their receive count grows by one; nothing consumes the DLQ automatically, so
 * this costs nothing but that count. A browse that is killed leaves them hidden for `visibilitySeconds`.
 */
export async function browse(
  sqs: SQSClient,
  queueUrl: string,
  options: BrowseOptions,
  visit: (message: Message) => Promise<Visit>,
): Promise<void> {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const seen = new Set<string>();
  const held = new Map<string, string>();
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
      for (const message of out.Messages ?? []) {
        const id = message.MessageId ?? '';
        const handle = message.ReceiptHandle ?? '';
        if (seen.has(id)) {
          // Its visibility lapsed during a long browse; keep the newest receipt handle to release it.
          if (held.has(id)) held.set(id, handle);
          continue;
        }
        seen.add(id);
        fresh += 1;
        if (stop) {
          held.set(id, handle);
          continue;
        }
        const decision = await visit(message);
        if (!decision.deleted) held.set(id, handle);
        if (decision.stop) stop = true;
      }
      // An empty page means the queue has nothing more to show. A page of letters seen before (their
      // browse visibility lapsed on a long run) does not: look a few pages further before giving up.
      if ((out.Messages ?? []).length === 0) break;
      stalePages = fresh === 0 ? stalePages + 1 : 0;
      if (stalePages >= 3) break;
    }
  } finally {
    await release(sqs, queueUrl, [...held.values()]);
  }
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
