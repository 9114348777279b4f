/**
 * SQS FIFO queue names end in `.fifo` (AWS requires it), so their URLs and ARNs do too; sends to them need
 * a message group. A standard queue's message may carry a group too (fair queues), so this, not the
 * message, tells FIFO.
 */
export function isFifoQueue(queueUrlOrArn: string): boolean {
  return queueUrlOrArn.endsWith('.fifo');
}
