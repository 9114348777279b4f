import { describe, expect, it } from 'vitest';
import { InMemoryQueue } from '../../../shared/testing/in-memory-queue.ts';

describe('Class: InMemoryQueue receive', () => {
  it('hands out the first visible messages in send order, skipping hidden ones, up to max', () => {
    let now = 1_000_000;
    const queue = new InMemoryQueue({ now: () => now });
    const ids = Array.from({ length: 6 }, (_, i) => queue.send(`b${i}`, { delaySeconds: i === 1 ? 5 : 0 }));
    const first = queue.receive(3);
    expect(first.map((r) => r.messageId)).toEqual([ids[0], ids[2], ids[3]]);
    expect(first.map((r) => r.attributes.ApproximateReceiveCount)).toEqual(['1', '1', '1']);
    expect(queue.receive(10).map((r) => r.messageId)).toEqual([ids[4], ids[5]]);
    expect(queue.receive(0)).toEqual([]);
    now += 5_000;
    expect(queue.receive(10).map((r) => r.messageId)).toEqual([ids[1]]);
    now += 30_000;
    // Every visibility ended: all six again, in send order, as the second receive of most.
    expect(queue.receive(Number.POSITIVE_INFINITY).map((r) => r.messageId)).toEqual(ids);
    expect(queue.receive(2.5)).toEqual([]);
  });

  it('lets pick choose among the visible messages, then caps at max', () => {
    const queue = new InMemoryQueue();
    const ids = ['a', 'b', 'c'].map((b) => queue.send(b));
    const picked = queue.receive(2, { pick: (visible) => [...visible].reverse() });
    expect(picked.map((r) => r.messageId)).toEqual([ids[2], ids[1]]);
  });
});
