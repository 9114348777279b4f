// The operator's writes of the `jobs` table (docs/protocol.md, E10 and C1/C2): a redrive's reset and its
// undo, and a cancel, each one write on every path but a full history, whose trim is written only over the
// version and the list read. They send what core/protocol/redrive.ts and cancel.ts build and hand the
// answer to those files' readers. The job store (dynamodb-job-store.ts) passes its table; workers never
// call these.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { StoreConflictError, StoreRefusedError } from '../../errors.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { CancelRequest, CancelResult, RedriveBy } from '../contract/job-store.ts';
import { cancelledEvent, redriveEvent } from '../contract/job-store.ts';
import { type CancelHistory, cancelAnswer, cancelUpdate, refusedCancel } from '../protocol/cancel.ts';
import { trimmedHistory } from '../protocol/history-writes.ts';
import { withRedriveHash } from '../protocol/payload-hash.ts';
import {
  isOwnUndo,
  type RedriveHistory,
  redriveUpdate,
  refusedRedrive,
  undoRedriveUpdate,
} from '../protocol/redrive.ts';
import { guardStore } from './store-errors.ts';

/** What the operator's writes need of the job store: its client, table, TTL rule and consistent read. */
export interface OperatorTable {
  readonly doc: DynamoDBDocumentClient;
  readonly tableName: string;
  readonly expiresAt: (fromMs: number) => number;
  readonly get: (dedupKey: string) => Promise<JobItem | undefined>;
}

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
    guardStore({ operation: 'reset-for-redrive', key: dedupKey }, (http) =>
      t.doc.send(
        new UpdateCommand(
          withRedriveHash(
            redriveUpdate(t.tableName, dedupKey, now, t.expiresAt(now), leaseEndedBefore, history, planned),
            by,
          ),
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
  // Refused: read afresh (refusedRedrive). A full history is retried, trimmed over the version and the
  // list read (a change in between, such as a dropped copy's count, refuses it again: at most 3 times).
  for (let tries = 0; tries < 3; tries++) {
    const next = refusedRedrive(await t.get(dedupKey), event, planned, now);
    if (typeof next === 'boolean') return next;
    try {
      await attempt(next);
      return true;
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }
  return false;
}

/** JobStore.undoRedrive on DynamoDB: one conditional update. */
export async function undoRedrive(
  t: OperatorTable,
  before: JobItem,
  resetVersion: number,
  now: number,
): Promise<boolean> {
  try {
    await guardStore({ operation: 'undo-redrive', key: before.dedupKey }, (http) =>
      t.doc.send(new UpdateCommand(undoRedriveUpdate(t.tableName, before, resetVersion, now)), http),
    );
    return true;
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
    return isOwnUndo(await t.get(before.dedupKey), before, resetVersion, now);
  }
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
      const out = await guardStore({ operation: 'cancel', key: dedupKey }, (http) =>
        t.doc.send(
          new UpdateCommand({
            ...cancelUpdate(t.tableName, dedupKey, { now: request.now, expiresAt, history }),
            ReturnValues: 'ALL_OLD',
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
          http,
        ),
      );
      return cancelAnswer(out.Attributes as JobItem | undefined);
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      const refused = refusedCancel(error.Item, cancelledEvent(request));
      if ('outcome' in refused) return refused;
      if (tries >= 3) {
        throw new StoreConflictError(
          'cancel',
          `the job item under ${dedupKey} kept changing while its full history was trimmed (${tries + 1} tries): not cancelled; run the cancel again`,
          error,
        );
      }
      const event = cancelledEvent(request);
      history = refused.item === undefined ? { event } : trimmedHistory(refused.item, event);
    }
  }
}
