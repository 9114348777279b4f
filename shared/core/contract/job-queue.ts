/** Reason attributes a dead letter carries (also what `leaseq dlq list` shows). */
export interface DeadLetterReason {
  readonly reason: string;
  readonly errorClass: string;
  readonly errorMessage: string;
  readonly attempts: number;
  readonly dedupKey?: string;
  readonly worker: string;
  readonly messageId: string;
  readonly type?: string;
  /** A `payload-mismatch` letter's two hashes, the job's and the message's (decisions/payload-hash.ts). */
  readonly payloadHashes?: { readonly job: string; readonly message: string };
}

/** A message attribute as a record carries it (Lambda's shape: binary values base64). */
export interface ResendAttribute {
  readonly dataType: string;
  readonly stringValue?: string;
  readonly binaryValue?: string;
}

/** What a re-sent message carries besides its body. */
export interface ResendOptions {
  /** Seconds before it shows; ignored on FIFO, which takes no per-message delay. */
  readonly delaySeconds: number;
  readonly attributes?: Readonly<Record<string, ResendAttribute>>;
  /** The FIFO message group (the copy goes to its tail), or a standard fair queue's tenant (its share). */
  readonly groupId?: string;
  /**
   * FIFO only: the re-send's deduplication id, derived from the message it replaces, so a send the SDK
   * retried after a lost answer is still one message.
   */
  readonly deduplicationId?: string;
}

/**
 * The port for the message side of a job: visibility is the SQS half of the lease. The SQS adapter
 * implements it; tests may pass a plain object.
 */
export interface JobQueue {
  /** Sets the message's visibility timeout (0 releases it at once). Throws on an invalid receipt handle. */
  changeVisibility(receiptHandle: string, seconds: number): Promise<void>;
  /** Deletes the message. */
  delete(receiptHandle: string): Promise<void>;
  /**
   * Sends `body` again to the jobs queue as a new message (receive count 1), visible after
   * `options.delaySeconds`. A limit's bounce uses it so receives that are not attempts do not add up to
   * the queue's redrive safety net. Optional: without it the bounce keeps changing the visibility.
   */
  resend?(body: string, options: ResendOptions): Promise<void>;
  /** Sends the original body to the DLQ with the reason as message attributes. */
  sendToDeadLetter(body: string, reason: DeadLetterReason, groupId?: string): Promise<void>;
}
