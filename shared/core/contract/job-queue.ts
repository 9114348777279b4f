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
  /** Sends the original body to the DLQ with the reason as message attributes. */
  sendToDeadLetter(body: string, reason: DeadLetterReason, groupId?: string): Promise<void>;
}
