import { createHash } from 'node:crypto';

/**
 * What AWS takes as a FIFO `MessageGroupId` (and `MessageDeduplicationId`): 1-128 characters of letters,
 * digits and the punctuation `!"#$%&'()*+,-./:;<=>?@[\]^_\`{|}~`, which is printable ASCII without the
 * space. A dedup key may be longer and have inner spaces, so it is not always a valid group id.
 */
const GROUP_ID = /^[\x21-\x7e]{1,128}$/;

/** Longest group id SQS takes. */
export const MAX_GROUP_ID_LENGTH = 128;

/** Prefix of a group id derived from a dedup key that is not a valid group id itself. */
export const DERIVED_GROUP_PREFIX = 'leaseq-sha256-';

/** Whether SQS takes `value` as a FIFO message group id (or deduplication id). */
export function isValidGroupId(value: unknown): value is string {
  return typeof value === 'string' && GROUP_ID.test(value);
}

/** Why `value` is not a valid group id, for an error message; undefined when it is one. */
export function groupIdProblem(value: unknown): string | undefined {
  if (isValidGroupId(value)) return undefined;
  const shown =
    typeof value === 'string'
      ? JSON.stringify(value.slice(0, 40)) + (value.length > 40 ? '...' : '')
      : typeof value;
  return (
    `group id ${shown} is not a valid SQS MessageGroupId: 1-${MAX_GROUP_ID_LENGTH} characters of letters, ` +
    'digits and punctuation, no spaces'
  );
}

/**
 * The FIFO group of a job that has no chosen group: its dedup key when SQS takes that as a group id (copies
 * of one job are then one group, handled one after another), else a stable id derived from it,
 * `leaseq-sha256-<64 hex digits of SHA-256 of the key's UTF-8>`, so every send of the job (producer, CLI,
 * redrive) lands in the same group.
 */
export function groupIdForKey(dedupKey: string): string {
  if (isValidGroupId(dedupKey)) return dedupKey;
  return `${DERIVED_GROUP_PREFIX}${createHash('sha256').update(dedupKey, 'utf8').digest('hex')}`;
}
