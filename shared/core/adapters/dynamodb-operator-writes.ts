// The operator's writes of the `jobs` table (docs/protocol.md, E10 and C1/C2): a redrive's reset and a
// cancel, each one write on every path but a full history, whose trim is written only over the version
// and the list read. The job store (dynamodb-job-store.ts) passes its table; workers never call these.
import {
  ConditionalCheckFailedException,
  type ReturnValuesOnConditionCheckFailure,
} from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { StoreRefusedError } from '../../errors.ts';
import { HISTORY_MAX } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { CancelRequest, CancelResult, RedriveBy } from '../contract/job-store.ts';
import { cancelledEvent, redriveEvent } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import {
  type CancelHistory,
  cancelUpdate,
  type RedriveHistory,
  redriveUpdate,
} from './dynamodb-job-expressions.ts';
import { cancelAnswer, refusedCancel } from './dynamodb-refusals.ts';
import { guardStore } from './store-errors.ts';

/** What the operator's writes need of the job store: its client, table, TTL rule and consistent read. */
export interface OperatorTable {
  readonly doc: DynamoDBDocumentClient;
  readonly tableName: string;
  readonly expiresAt: (fromMs: number) => number;
  readonly get: (dedupKey: string) => Promise<JobItem | undefined>;
}

const ALL_OLD: ReturnValuesOnConditionCheckFailure = 'ALL_OLD';

/** JobStore.resetForRedrive (contract/job-store.ts) on the table `t`. */
export async function resetForRedrive(
  t: OperatorTable,
  dedupKey: string,
  {
    now,
    leaseEndedBefore,
    by,
    planned,
  }: {
    readonly now: number;
    readonly leaseEndedBefore: number;
    readonly by: RedriveBy;
    readonly planned?: number;
  },
): Promise<boolean> {
  const event = redriveEvent(now, by);
  const send = (history: RedriveHistory) =>
    guardStore('reset-for-redrive', (http) =>
      t.doc.send(
        new UpdateCommand(
          redriveUpdate(t.tableName, dedupKey, now, t.expiresAt(now), leaseEndedBefore, history, planned),
        ),
        http,
      ),
    );
  // No room in the item for the event: redriven without it, its index keys kept; no room for them
  // either, without them (the redrive must never fail for its history).
  const tooLarge = (error: unknown) =>
    error instanceof StoreRefusedError && error.problem === 'item-too-large';
  const attempt = (history: RedriveHistory) =>
    send(history).catch((error: unknown) => {
      if (!tooLarge(error)) throw error;
      return send({ leaveOut: 'events' }).catch((again: unknown) => {
        if (!tooLarge(again)) throw again;
        return send({ leaveOut: 'all' });
      });
    });
  try {
    await attempt({ event });
    return true;
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
  }
  // Refused: finished, under a live lease, absent, moved since the plan's read (`planned`), or its history
  // is full; or, with `planned`, this very reset landed and its answer was lost (the SDK's retry refused).
  // Only a full history is retried, with the oldest events dropped, over the version and the list read (a
  // change in between, such as a dropped copy's count, refuses it again, and it is read afresh: at most 3
  // times; with `planned`, only at that version).
  for (let tries = 0; tries < 3; tries++) {
    const item = await t.get(dedupKey);
    if (planned !== undefined && ownRedriveReset(item, planned, now)) return true;
    if (planned !== undefined && item?.version !== planned) return false;
    if (!item || (item.history?.length ?? 0) < HISTORY_MAX) return false;
    const read = item.history ?? [];
    const history = [...read, event];
    try {
      await attempt({
        replace: history.slice(-HISTORY_MAX),
        dropped: history.length - HISTORY_MAX,
        readVersion: item.version,
        read,
      });
      return true;
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }
  return false;
}

/**
 * Whether `item` is as the redrive reset planned at version `planned` at `now` left it: the version after
 * it, RETRY_WAIT with no attempt, written at `now` (the reset's own updatedAt). A claim or any other write
 * since moves the version on, so this is the reset's own write whose answer was lost.
 */
function ownRedriveReset(item: JobItem | undefined, planned: number, now: number): boolean {
  return (
    item !== undefined &&
    item.version === planned + 1 &&
    item.status === JobStatus.RetryWait &&
    item.attempts === 0 &&
    item.updatedAt === now
  );
}

/** JobStore.cancel (contract/job-store.ts) on the table `t`. */
export async function cancelJob(
  t: OperatorTable,
  dedupKey: string,
  request: CancelRequest,
): Promise<CancelResult> {
  const expiresAt = t.expiresAt(request.now);
  let history: CancelHistory = { event: cancelledEvent(request) };
  // One write on every path but a full history, which is replaced at the version its refusal returned
  // (a change in between refuses it again, and it is decided afresh).
  for (let tries = 0; ; tries++) {
    try {
      const out = await guardStore('cancel', (http) =>
        t.doc.send(
          new UpdateCommand({
            ...cancelUpdate(t.tableName, dedupKey, { now: request.now, expiresAt, history }),
            ReturnValues: 'ALL_OLD',
            ReturnValuesOnConditionCheckFailure: ALL_OLD,
          }),
          http,
        ),
      );
      return cancelAnswer(out.Attributes as JobItem | undefined);
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      const refused = refusedCancel(error.Item, cancelledEvent(request));
      if ('outcome' in refused) return refused;
      if (tries >= 3) throw error;
      const read = refused.item.history ?? [];
      const list = [...read, cancelledEvent(request)];
      history = {
        replace: list.slice(-HISTORY_MAX),
        dropped: list.length - HISTORY_MAX,
        readVersion: refused.item.version,
        read,
      };
    }
  }
}
