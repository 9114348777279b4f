import { ConfigError } from '../errors.ts';

/**
 * SQS FIFO queue names end in `.fifo` (AWS requires it), so their URLs and ARNs do too; sends to them need
 * a message group. A standard queue's message may carry a group too (fair queues), so this, not the
 * message, tells FIFO.
 */
export function isFifoQueue(queueUrlOrArn: string): boolean {
  return queueUrlOrArn.endsWith('.fifo');
}

/** A queue URL's parts: what follows the host, whatever host it names. */
export interface QueueUrlParts {
  /** The twelve-digit account (or an emulator's stand-in), when the path names one. */
  readonly account: string | undefined;
  /** The queue's name: the path's last part. */
  readonly name: string;
}

/**
 * Reads a queue URL of any shape AWS or an emulator hands out (`https://sqs.<region>.amazonaws.com/<account>/<name>`,
 * `http://127.0.0.1:4566/<account>/<name>`, LocalStack's `http://sqs.<region>.127.0.0.1:4566/<account>/<name>`
 * and `.../queue/<region>/<account>/<name>`). Not with a URL parser: LocalStack's region-before-address host is
 * not a valid URL host, though SQS clients never resolve it (requests go to the configured endpoint).
 * @throws ConfigError naming the value when it is no http(s) URL with a path.
 */
export function parseQueueUrl(queueUrl: string): QueueUrlParts {
  const match = /^https?:\/\/[^/?#\s]+(\/[^?#\s]*)/i.exec(queueUrl.trim());
  const parts = (match?.[1] ?? '').split('/').filter(Boolean);
  const name = parts.at(-1);
  if (!name) {
    throw new ConfigError(
      `not a queue URL (expected http(s)://<host>/<account>/<name>): ${JSON.stringify(queueUrl)}`,
    );
  }
  return { account: parts.length >= 2 ? parts.at(-2) : undefined, name };
}
