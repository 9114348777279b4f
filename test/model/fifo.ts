import type { SQSRecord } from 'aws-lambda';
import type { QueuedMessage } from '../../shared/testing/in-memory-queue.ts';
import type { JobSpec } from './scenario.ts';

// Issue 31 kind `fifo-limit` (meet.ts): the model's queue as a FIFO queue delivers it.

export const FIFO_SUFFIX = '.fifo';

/**
 * Kind `fifo-limit`: which visible messages a FIFO receive returns. Per group, in send order, only while
 * no earlier message of the group is in flight (hidden), up to `max`; groups in random order.
 */
export function fifoPick(
  visible: readonly QueuedMessage[],
  all: readonly QueuedMessage[],
  max: number,
  rng: () => number,
): QueuedMessage[] {
  const order = (m: QueuedMessage) => Number(m.messageId.replace(/^m-/, ''));
  const now = Date.now();
  const groups = new Map<string, QueuedMessage[]>();
  for (const m of [...all].sort((a, b) => order(a) - order(b))) {
    const g = m.groupId ?? '';
    groups.set(g, [...(groups.get(g) ?? []), m]);
  }
  const byId = new Map(visible.map((m) => [m.messageId, m]));
  const heads: QueuedMessage[][] = [];
  for (const members of groups.values()) {
    const run: QueuedMessage[] = [];
    for (const m of members) {
      if (m.visibleAt > now) break;
      const v = byId.get(m.messageId);
      if (v) run.push(v);
    }
    if (run.length > 0) heads.push(run);
  }
  for (let i = heads.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [heads[i], heads[j]] = [heads[j] as QueuedMessage[], heads[i] as QueuedMessage[]];
  }
  return heads.flat().slice(0, max);
}

/** Kind `fifo-limit`: a record as a FIFO queue's event source hands it over. */
export function fifoRecord(record: SQSRecord): SQSRecord {
  return {
    ...record,
    attributes: {
      ...record.attributes,
      SequenceNumber: record.messageId.replace(/^m-/, '').padStart(20, '0'),
    },
    eventSourceARN: `${record.eventSourceARN}${FIFO_SUFFIX}`,
  };
}

/** The group a FIFO schedule's job is sent in. */
export function fifoGroup(spec: JobSpec, dedupKey: string): string {
  return spec.group === undefined ? dedupKey : `g${spec.group}`;
}
