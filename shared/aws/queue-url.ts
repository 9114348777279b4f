/** SQS FIFO queue URLs end in `.fifo`; sends to them need a message group. */
export function isFifoQueue(queueUrl: string): boolean {
  return queueUrl.endsWith('.fifo');
}
