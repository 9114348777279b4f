// The checkpoint (docs/protocol.md, E5): a step's state under the fence and the version this lease last
// wrote, with its `step` event when STEP_EVENTS is on. Its refusal is the fence's (fence.ts).

import type { HistoryEvent } from '../contract/job-history.ts';
import type { Checkpoint } from '../contract/job-item.ts';
import type { JobLease } from '../contract/job-store.ts';
import { attemptOf, STEP_EVENTS } from '../decisions/history-events.ts';
import { fencedUpdate } from './fence.ts';
import { type JobItemUpdate, names } from './update.ts';

/** A checkpoint: only over the version this lease last wrote, so a lost answer is never written twice. */
export function checkpointUpdate(tableName: string, lease: JobLease, checkpoint: Checkpoint): JobItemUpdate {
  return fencedUpdate(tableName, lease, {
    UpdateExpression: 'SET #checkpoint = :checkpoint, #version = #version + :one, #updatedAt = :now',
    ConditionSuffix: ' AND #version = :version',
    ExpressionAttributeNames: names('checkpoint', 'version', 'updatedAt'),
    ExpressionAttributeValues: {
      ':checkpoint': checkpoint,
      ':one': 1,
      ':now': checkpoint.at,
      ':version': lease.version,
    },
  });
}

/** The history events a checkpoint adds: its `step` event, when STEP_EVENTS is on. */
export function checkpointEvents(lease: JobLease, checkpoint: Checkpoint): HistoryEvent[] {
  return STEP_EVENTS ? [{ e: 'step', at: checkpoint.at, ...attemptOf(lease), step: checkpoint.step }] : [];
}
