// The payload hash on the job item (docs/protocol.md, "A duplicate with another payload"): the clause a
// claim, a fast commit, a dead key's reset and an edited redrive add to their write; the new life a
// `new-job` type's message of another payload claims over a finished job; and the best-effort `mismatch`
// event a dead-lettered one leaves on the job it was not. No request of its own on the happy path.

import { HISTORY_MAX, type HistoryEvent, type MismatchEvent } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { ClaimRequest, ClaimResult, JobLease, RedriveBy } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { afterHistoryWrite, historyWrite } from '../decisions/history.ts';
import { attemptOf } from '../decisions/history-events.ts';
import { withHistory } from './history-writes.ts';
import { type JobItemUpdate, names } from './update.ts';

/**
 * `update` (a claim's or a fast commit's) taking only an item with no payload hash or `hash`, and storing
 * `hash` on one without: a message of another payload never runs on the job, and its refusal returns the
 * item (ALL_OLD) with both hashes to tell. `replace`: the write starts a new life (a dead key's reset), so
 * the hash is the message's whatever the item had, removed when the message has none. Without `hash`,
 * and not `replace`, `update` unchanged.
 */
export function withPayloadHash(
  update: JobItemUpdate,
  hash: string | undefined,
  mode: 'claim' | 'replace' = 'claim',
): JobItemUpdate {
  if (hash === undefined && mode === 'claim') return update;
  const expression = update.UpdateExpression ?? '';
  const values = { ...update.ExpressionAttributeValues };
  let updated: string;
  if (hash === undefined) {
    updated = addRemove(expression, '#payloadHash');
  } else {
    values[':payloadHash'] = hash;
    updated = addSet(
      expression,
      mode === 'replace'
        ? '#payloadHash = :payloadHash'
        : '#payloadHash = if_not_exists(#payloadHash, :payloadHash)',
    );
  }
  const condition =
    mode === 'claim' && update.ConditionExpression !== undefined
      ? `(${update.ConditionExpression}) AND (attribute_not_exists(#payloadHash) OR #payloadHash = :payloadHash)`
      : update.ConditionExpression;
  return {
    ...update,
    UpdateExpression: updated,
    ...(condition === undefined ? {} : { ConditionExpression: condition }),
    ExpressionAttributeNames: { ...update.ExpressionAttributeNames, ...names('payloadHash') },
    ExpressionAttributeValues: values,
  };
}

/**
 * An operator's redrive `update` as `by` asks: an edited payload's hash stored (or, unknown, the hash
 * removed: the next claim stores its message's), so the edit is never refused as another payload; an
 * unedited redrive keeps the job's hash.
 */
export function withRedriveHash(update: JobItemUpdate, by: RedriveBy | undefined): JobItemUpdate {
  return by?.edited ? withPayloadHash(update, by.payloadHash, 'replace') : update;
}

/**
 * The finished job a refused claim (`refused`) may claim as a new life: COMPLETED or DEAD, of the
 * request's type, with another payload hash, when the request asks for it (`newLifeOnMismatch`).
 */
export function lifeToRenew(refused: ClaimResult, req: ClaimRequest): JobItem | undefined {
  // A redrive's message (it names a life) is its letter's job again, never a new one (reset.ts too).
  if (refused.claimed || req.onlyIfMessageId !== undefined || !req.newLifeOnMismatch) return undefined;
  if (req.life !== undefined) return undefined;
  const old = refused.existing;
  const finished = old.status === JobStatus.Completed || old.status === JobStatus.Dead;
  const other =
    old.payloadHash !== undefined && req.payloadHash !== undefined && old.payloadHash !== req.payloadHash;
  return finished && other && old.type === req.type ? old : undefined;
}

/**
 * The claim of a new life over `old` (see {@link lifeToRenew}) and the claim it answers: the item reset as
 * a dead key's reset does (attempts 1, a new token, no checkpoint, result or dead-letter cause), the
 * message's hash stored, and a `mismatch` event (`newJob`) added to the history it keeps. Only over that
 * very item: same status, token and hash, so two messages cannot both renew it.
 */
export function newLifeClaim(
  tableName: string,
  req: ClaimRequest,
  old: JobItem,
  lease: { readonly leaseUntil: number; readonly expiresAt: number },
): { readonly update: JobItemUpdate; readonly answer: ClaimResult } {
  const claimed: JobLease = {
    dedupKey: req.dedupKey,
    owner: req.owner,
    token: old.token + 1,
    attempts: 1,
    messageId: req.messageId,
    version: old.version + 1,
    leaseUntil: lease.leaseUntil,
  };
  const jobHash = old.payloadHash ?? '';
  const messageHash = req.payloadHash ?? '';
  const event: HistoryEvent = {
    e: 'mismatch',
    at: req.now,
    ...attemptOf(claimed),
    messageId: req.messageId,
    hash: jobHash,
    got: messageHash,
    newJob: true,
  };
  const history = historyWrite(req.dedupKey, old.history, [event], req.now);
  const update = withHistory(newLifeUpdate(tableName, req, old, lease), history, { overKnownList: false });
  const known = afterHistoryWrite(old.history, history);
  if (known?.length) claimed.history = known;
  return {
    update,
    answer: {
      claimed: true,
      lease: claimed,
      kind: 'fresh',
      newLifeOf: { status: old.status, jobHash, messageHash },
    },
  };
}

function newLifeUpdate(
  tableName: string,
  req: ClaimRequest,
  old: Pick<JobItem, 'status' | 'token' | 'version' | 'payloadHash'>,
  lease: { readonly leaseUntil: number; readonly expiresAt: number },
): JobItemUpdate {
  return {
    TableName: tableName,
    Key: { dedupKey: req.dedupKey },
    UpdateExpression:
      'SET #status = :inProgress, #owner = :owner, #leaseUntil = :leaseUntil, #token = :newToken, ' +
      '#attempts = :one, #version = :newVersion, #messageId = :messageId, #createdAt = :createdAt, ' +
      '#claimedAt = :now, #updatedAt = :now, #expiresAt = :expiresAt, #payloadHash = :payloadHash, ' +
      '#life = if_not_exists(#life, :zero) + :one' +
      (req.originId === undefined ? '' : ', #originId = :originId') +
      ' REMOVE #checkpoint, #deadReason, #deadAt, #deadKeyUntil, #lastError, #lastErrorClass, #refunds, ' +
      '#conflicts, #completedAt, #result' +
      (req.originId === undefined ? ', #originId' : ''),
    ConditionExpression:
      '#status = :oldStatus AND #token = :oldToken AND #type = :type AND #payloadHash = :oldHash',
    ExpressionAttributeNames: {
      ...names('status', 'owner', 'leaseUntil', 'token', 'attempts', 'version', 'messageId', 'createdAt'),
      ...names('claimedAt', 'updatedAt', 'expiresAt', 'payloadHash', 'originId', 'checkpoint', 'deadReason'),
      ...names(
        'deadAt',
        'deadKeyUntil',
        'lastError',
        'lastErrorClass',
        'refunds',
        'conflicts',
        'completedAt',
      ),
      ...names('result', 'type', 'life'),
    },
    ExpressionAttributeValues: {
      ':inProgress': JobStatus.InProgress,
      ':owner': req.owner,
      ':leaseUntil': lease.leaseUntil,
      ':newToken': old.token + 1,
      ':one': 1,
      ':zero': 0,
      ':newVersion': old.version + 1,
      ':messageId': req.messageId,
      ':createdAt': req.createdAt,
      ':now': req.now,
      ':expiresAt': lease.expiresAt,
      ':payloadHash': req.payloadHash ?? null,
      ...(req.originId === undefined ? {} : { ':originId': req.originId }),
      ':oldStatus': old.status,
      ':oldToken': old.token,
      ':type': req.type,
      ':oldHash': old.payloadHash ?? null,
    },
  };
}

/**
 * Best effort, after a message of another payload was refused for the job `job`: its `mismatch` event
 * appended while the item is that job (same token) and its history has room. Unfenced and without a
 * version bump: a holder's later appends see one more event than it knew (a lost lease's event does the
 * same), and its trim, refused over a list it did not know, is built again over the one returned.
 */
export function mismatchEventUpdate(
  tableName: string,
  job: Pick<JobItem, 'dedupKey' | 'token'>,
  event: MismatchEvent,
): JobItemUpdate {
  return {
    TableName: tableName,
    Key: { dedupKey: job.dedupKey },
    UpdateExpression: 'SET #history = list_append(if_not_exists(#history, :noEvents), :events)',
    ConditionExpression:
      'attribute_exists(#dedupKey) AND #token = :token AND (attribute_not_exists(#history) OR size(#history) < :historyMax)',
    ExpressionAttributeNames: names('dedupKey', 'token', 'history'),
    ExpressionAttributeValues: {
      ':noEvents': [],
      ':events': [event],
      ':token': job.token,
      ':historyMax': HISTORY_MAX,
    },
  };
}

/** `clause` added to the SET clause of `expression` (which starts with one), before a REMOVE or ADD. */
function addSet(expression: string, clause: string): string {
  if (!expression.startsWith('SET ')) throw new Error(`unreachable: no SET clause in ${expression}`);
  const ends = [expression.indexOf(' REMOVE '), expression.indexOf(' ADD ')].filter((i) => i >= 0);
  const end = ends.length === 0 ? expression.length : Math.min(...ends);
  return `${expression.slice(0, end)}, ${clause}${expression.slice(end)}`;
}

/** `attribute` added to the REMOVE clause of `expression`, or a REMOVE clause of it. */
function addRemove(expression: string, attribute: string): string {
  const remove = expression.indexOf(' REMOVE ');
  if (remove < 0) return `${expression} REMOVE ${attribute}`;
  // A REMOVE clause ends the expression in every edge's write (or an ADD follows it).
  const add = expression.indexOf(' ADD ', remove);
  return add < 0
    ? `${expression}, ${attribute}`
    : `${expression.slice(0, add)}, ${attribute}${expression.slice(add)}`;
}
