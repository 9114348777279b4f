import { describe, expect, it } from 'vitest';
import { groupIdForKey, groupIdProblem, isValidGroupId } from '../../../shared/aws/message-group.ts';

// AWS's documented rule for MessageGroupId and MessageDeduplicationId, spelled out character by character
// (not the implementation's range): up to 128 alphanumerics and !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~.
const AWS_GROUP_ID = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]{1,128}$/;

describe('Function: groupIdForKey', () => {
  it('keeps a key that is a valid group id', () => {
    for (const key of [
      'order-1234',
      'a',
      'welcome-email:user-42',
      'x'.repeat(128),
      '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~',
    ]) {
      expect(groupIdForKey(key)).toBe(key);
      expect(groupIdForKey(key)).toMatch(AWS_GROUP_ID);
    }
  });

  it.each([
    ['an inner space', 'order 1234'],
    ['129 characters', 'k'.repeat(129)],
    ['256 characters with spaces', `a ${'b'.repeat(252)} c`],
  ])('derives a valid, stable id from a key with %s', (_what, key) => {
    const id = groupIdForKey(key);
    expect(id).toMatch(AWS_GROUP_ID);
    expect(id).toMatch(/^leaseq-sha256-[0-9a-f]{64}$/);
    expect(groupIdForKey(key)).toBe(id);
  });

  it('derives different ids for different keys', () => {
    expect(groupIdForKey('order 1')).not.toBe(groupIdForKey('order 2'));
  });
});

describe('Function: isValidGroupId', () => {
  it('agrees with the AWS rule', () => {
    const cases = [
      'ok',
      'order 1234',
      '',
      'x'.repeat(128),
      'x'.repeat(129),
      'tab\there',
      'café',
      'a~b',
      'line\n',
    ];
    for (const value of cases)
      expect(isValidGroupId(value), JSON.stringify(value)).toBe(AWS_GROUP_ID.test(value));
    expect(isValidGroupId(7)).toBe(false);
  });

  it('names the rule when refusing', () => {
    expect(groupIdProblem('order 1234')).toMatch(
      /group id "order 1234" is not a valid SQS MessageGroupId: 1-128 characters of letters, digits and punctuation, no spaces/,
    );
    expect(groupIdProblem('order-1234')).toBeUndefined();
  });
});
