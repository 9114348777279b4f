import { expect } from 'vitest';
import type { JobItem } from '../../shared/core/contract/job-item.ts';

/** The item without what the history writes (events, their count, the `problems` index keys). */
export function protocolFields(item: JobItem | undefined): Partial<JobItem> | undefined {
  if (item === undefined) return undefined;
  const { history: _h, historyDropped: _d, problemShard: _s, problemAt: _a, ...rest } = item;
  return rest;
}

/**
 * A lost lease left the item's protocol fields as they were and only appended its `lease-lost` event
 * (the best-effort history write, docs/protocol.md "History"), naming the worker that lost it.
 */
export function expectOnlyLeaseLostNoted(
  after: JobItem | undefined,
  before: JobItem | undefined,
  owner: string,
): void {
  expect(protocolFields(after)).toEqual(protocolFields(before));
  expect(after?.history?.length).toBe((before?.history?.length ?? 0) + 1);
  expect(after?.history?.at(-1)).toMatchObject({ e: 'lease-lost', owner });
  expect(after?.problemShard).toMatch(/^p\d\d$/);
}
