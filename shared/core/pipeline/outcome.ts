// What happened to one record, and the one place that decides whether its message is deleted or kept.

/** Per-call options of JobProcessor.process. */
export interface ProcessOptions {
  /** Epoch ms by which this record's work must be finished (the invocation's deadline less a margin). */
  readonly deadline?: number;
  /**
   * Epoch ms of the receive that handed out the record (its batch's start): every visibility the
   * processor asks for keeps within SQS's 12 hours from it. @default when process() is called
   */
  readonly receivedAt?: number;
}

/** Everything the pipeline can do with a record. */
export type RecordAction =
  | 'completed'
  | 'duplicate'
  | 'dead-copy'
  | 'cancelled'
  | 'cancelled-copy'
  /** A redrive's message of an earlier life of its key, met by the job of a later one: deleted, never run. */
  | 'other-life-copy'
  | 'own-message-early'
  | 'contended'
  | 'retry'
  | 'dead-lettered'
  | 'lease-lost'
  | 'lease-ran-out'
  | 'store-unavailable'
  | 'deadline'
  | 'deferred'
  /** No concurrency slot or rate permit: given back with a delay, no attempt used (limit-bounce.ts). */
  | 'limited'
  /**
   * The same, sent again as a new message (its receive count starts afresh) and this one deleted; on FIFO
   * to its group's tail, so the rest of its group goes on (limit-bounce.ts). Retained: nothing to delete.
   */
  | 'resent';

/** What happened to one record; `retain` means the message stays in the queue (a batch item failure). */
export interface RecordOutcome {
  readonly messageId: string;
  readonly disposition: 'delete' | 'retain';
  readonly action: RecordAction;
  readonly dedupKey?: string;
}

/**
 * Whether a record's message is deleted (the job is settled: done, dead-lettered, cancelled, or this is a
 * copy of one that is) or stays in the queue, where it is what brings the job back.
 */
export function dispositionOf(action: RecordAction): RecordOutcome['disposition'] {
  return action === 'completed' ||
    action === 'dead-lettered' ||
    action === 'duplicate' ||
    action === 'dead-copy' ||
    action === 'cancelled' ||
    action === 'cancelled-copy' ||
    action === 'other-life-copy'
    ? 'delete'
    : 'retain';
}

/** The outcome of `action` for the record `messageId` (of job `dedupKey`, once its body parsed). */
export function outcomeOf(messageId: string, action: RecordAction, dedupKey?: string): RecordOutcome {
  return dedupKey === undefined
    ? { messageId, action, disposition: dispositionOf(action) }
    : { messageId, dedupKey, action, disposition: dispositionOf(action) };
}
