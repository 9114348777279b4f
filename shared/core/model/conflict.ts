// What an optimistic conflict that outlasted its tries was about: the table, the key (its fingerprint), the
// version the job expected and the one found. Only a job that is about to give its attempt up pays for it (one strongly
// consistent read of the refused item); a commit that succeeds, or a conflict a re-run resolves, reads
// nothing extra. The transaction's own answer cannot carry it without asking every effect to return its
// old item (ReturnValuesOnConditionCheckFailure), which would grow every commit's request.

import { createHash } from 'node:crypto';
import type { Effect } from '../contract/job-store.ts';
import type { EffectTable, Item } from './effect-table.ts';
import { keyName } from './table.ts';

/** How long the read-back may take: the attempt is failing anyway, its error must not wait on it. */
const READ_BACK_MS = 2000;

/** The text DynamoDB's own refusal lacks: why a row seeded by hand never takes a versionedPut. */
export const NO_VERSION_HINT = 'row has no version attribute: seed rows with version 0 or use put';

/**
 * One sentence on the effect at `index` of a refused write (`versionedPut to table T key sku=#1b4f0e98:
 * expected version 3, found version 4`), reading the item back through the job's table handles; undefined when the
 * refusal was not one of `effects` (the job item itself, or a named-lease fence past them). The read
 * stops when `signal` (the attempt's time) aborts, and is skipped once it has: the detail must not cost
 * the attempt its time, or turn a counted conflict into a deadline.
 */
export async function describeConflict(
  effects: readonly Effect[],
  refusal: { readonly index: number; readonly busy?: boolean },
  tables: Readonly<Record<string, EffectTable>>,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const effect = effects[refusal.index];
  const op = effect?.Put ?? effect?.Update ?? effect?.Delete ?? effect?.ConditionCheck;
  if (!effect || !op) return undefined;
  const tableName = op.TableName ?? '';
  const handle = Object.values(tables).find((t) => t.name === tableName);
  const key = keyOf(effect, handle);
  const versioned = versionedPutCheck(effect);
  const kind = versioned
    ? 'versionedPut'
    : effect.Put
      ? 'put'
      : effect.Update
        ? 'update'
        : effect.Delete
          ? 'delete'
          : 'condition check';
  const what = `${kind} to table ${tableName}${key ? ` key ${keyFingerprint(key)}` : ''}`;
  if (refusal.busy) return `${what}: the item was busy (another write to it was in flight)`;
  const found = handle && key ? await readBack(handle, key, signal) : { unread: true as const };
  if (versioned) {
    const expected =
      versioned.seen === undefined ? 'no item (seenVersion undefined)' : `version ${String(versioned.seen)}`;
    return `${what}: expected ${expected}, ${foundVersion(found, versioned.attribute)}`;
  }
  const state =
    'unread' in found
      ? 'the item could not be read back'
      : found.item
        ? 'the item exists'
        : 'there is no item';
  return `${what}: its condition ${op.ConditionExpression ?? ''} failed (${state})`;
}

/** Whether a {@link describeConflict} sentence says the row has no version attribute (it never clears). */
export function rowUnversioned(detail: string | undefined): boolean {
  return detail?.endsWith(NO_VERSION_HINT) ?? false;
}

function foundVersion(found: { item?: Item } | { unread: true }, attribute: string): string {
  if ('unread' in found) return 'and the item could not be read back';
  if (!found.item) return 'found no item';
  const version = found.item[attribute];
  if (version === undefined) return `found an item without a ${attribute} attribute: ${NO_VERSION_HINT}`;
  return `found version ${jsonText(version)}`;
}

/**
 * A key as its attribute names and a fingerprint of each value (`account=#3fa2c1d0`: the first 8 hex
 * digits of SHA-256 of the value's JSON text). The error text lands in logs, the job item and the letter,
 * which carry no payload contents by default, and a key value is the job's data (an account, an email).
 * The fingerprint still tells two rows apart, and a person holding the key can compute it.
 */
export function keyFingerprint(key: Readonly<Record<string, unknown>>): string {
  return Object.entries(key)
    .map(
      ([name, value]) => `${name}=#${createHash('sha256').update(jsonText(value)).digest('hex').slice(0, 8)}`,
    )
    .join(', ');
}

/**
 * JSON text of a key or a value read back, bigints written as the numbers they are: lib-dynamodb takes
 * and returns bigints for numbers past 2^53, which JSON.stringify refuses with a TypeError that would
 * replace the conflict being described.
 */
function jsonText(value: unknown): string {
  const marked = JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? `${BIGINT}${v}` : v));
  return (marked ?? String(value)).replace(new RegExp(`"${BIGINT}(-?\\d+)"`, 'g'), '$1');
}

/** Marks a bigint's digits inside the JSON text (a private-use character no key or value needs). */
const BIGINT = '\u{F8FF}n';

/** The seen version and version attribute of a Put exactly as versionedPut builds it; undefined otherwise. */
function versionedPutCheck(effect: Effect): { seen: unknown; attribute: string } | undefined {
  const put = effect.Put;
  const names = put?.ExpressionAttributeNames ?? {};
  if (put?.ConditionExpression === 'attribute_not_exists(#k)' && names['#k'] !== undefined) {
    // The attribute a later versionedPut would read; versionedPut's default.
    return { seen: undefined, attribute: 'version' };
  }
  if (put?.ConditionExpression === '#v = :seen' && names['#v'] !== undefined) {
    return { seen: put.ExpressionAttributeValues?.[':seen'], attribute: names['#v'] };
  }
  return undefined;
}

/**
 * The row the effect at `index` writes, as `<table>\u0000<key JSON>`; undefined when the refusal was not
 * one of `effects` or its key is unknown (a Put to a table the job did not declare). It names the row a
 * conflict was on, so a worker's jobs can take turns on it (pipeline/row-turns.ts). Kept in memory only.
 */
export function conflictRow(
  effects: readonly Effect[],
  index: number,
  tables: Readonly<Record<string, EffectTable>>,
): string | undefined {
  const effect = effects[index];
  const op = effect?.Put ?? effect?.Update ?? effect?.Delete ?? effect?.ConditionCheck;
  if (!effect || !op) return undefined;
  const tableName = op.TableName ?? '';
  const key = keyOf(
    effect,
    Object.values(tables).find((t) => t.name === tableName),
  );
  return key ? `${tableName}\u0000${jsonText(key)}` : undefined;
}

/** The effect's key: its `Key`, or for a Put the table's key attributes picked from its item. */
function keyOf(effect: Effect, handle: EffectTable | undefined): Item | undefined {
  const key = (effect.Update?.Key ?? effect.Delete?.Key ?? effect.ConditionCheck?.Key) as Item | undefined;
  if (key) return key;
  const item = effect.Put?.Item as Item | undefined;
  if (!item || !handle) return undefined;
  const { partitionKey, sortKey } = handle.definition;
  const names = sortKey === undefined ? [keyName(partitionKey)] : [keyName(partitionKey), keyName(sortKey)];
  return Object.fromEntries(names.map((name) => [name, item[name]]));
}

async function readBack(
  handle: EffectTable,
  key: Item,
  signal: AbortSignal | undefined,
): Promise<{ item?: Item } | { unread: true }> {
  if (signal?.aborted) return { unread: true };
  let timer: NodeJS.Timeout | undefined;
  let stop: (() => void) | undefined;
  const late = new Promise<{ unread: true }>((resolve) => {
    stop = () => resolve({ unread: true });
    timer = setTimeout(stop, READ_BACK_MS);
    signal?.addEventListener('abort', stop, { once: true });
  });
  try {
    return await Promise.race([
      handle.get(key).then(
        (item) => (item === undefined ? {} : { item }),
        () => ({ unread: true as const }),
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
    if (stop) signal?.removeEventListener('abort', stop);
  }
}
