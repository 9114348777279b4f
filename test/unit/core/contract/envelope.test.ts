import { describe, expect, it } from 'vitest';
import {
  isValidTraceparent,
  makeEnvelope,
  parseEnvelope,
} from '../../../../shared/core/contract/envelope.ts';
import { InvalidEnvelopeError } from '../../../../shared/errors.ts';

const valid = () =>
  makeEnvelope({
    id: 'e-1',
    dedupKey: 'order-123',
    type: 'ledger.credit',
    payload: { account: 'a', amount: 1 },
  });

function problemOf(body: string, isKnownType?: (t: string) => boolean): string | undefined {
  try {
    parseEnvelope(body, { maxBytes: 1024, ...(isKnownType ? { isKnownType } : {}) });
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidEnvelopeError);
    return (error as InvalidEnvelopeError).problem;
  }
}

describe('Function: parseEnvelope', () => {
  it('accepts a v1 envelope and keeps its fields', () => {
    const env = valid();
    expect(parseEnvelope(JSON.stringify(env))).toEqual(env);
  });

  it('names each kind of bad body', () => {
    expect(problemOf('not json')).toBe('not-json');
    expect(problemOf(JSON.stringify({ ...valid(), v: 2 }))).toBe('unknown-version');
    expect(problemOf(JSON.stringify({ ...valid(), dedupKey: '' }))).toBe('bad-schema');
    expect(problemOf(JSON.stringify({ ...valid(), dedupKey: 'x'.repeat(257) }))).toBe('bad-schema');
    expect(problemOf(JSON.stringify({ ...valid(), dedupKey: 'tab\tkey' }))).toBe('bad-schema');
    expect(problemOf(JSON.stringify({ ...valid(), createdAt: 'yesterday' }))).toBe('bad-schema');
    expect(problemOf(JSON.stringify([1, 2]))).toBe('bad-schema');
    expect(problemOf(JSON.stringify(valid()), () => false)).toBe('unknown-type');
    expect(problemOf(JSON.stringify({ ...valid(), payload: 'x'.repeat(2000) }))).toBe('too-large');
  });

  it('says a body that is not an envelope is not one, and names the expected shape', () => {
    const reason = (body: string) => {
      try {
        parseEnvelope(body);
      } catch (error) {
        return (error as Error).message;
      }
      return 'accepted';
    };
    const shape = '{v:1, id, dedupKey, type, createdAt, payload}';
    expect(reason(JSON.stringify({ orderId: 1 }))).toBe(`not a leaseq envelope: expected ${shape}`);
    expect(reason('"just a string"')).toBe(`not a leaseq envelope: expected ${shape}`);
    expect(reason('{oops')).toBe(`not a leaseq envelope: the body is not JSON; expected ${shape}`);
    expect(reason(JSON.stringify({ ...valid(), dedupKey: '' }))).toBe(
      `invalid leaseq envelope: dedupKey: dedupKey must be 1-256 printable characters; expected ${shape}`,
    );
  });

  it('accepts a 256-character dedup key and a W3C traceparent', () => {
    const env = {
      ...valid(),
      dedupKey: 'k'.repeat(256),
      trace: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    };
    expect(parseEnvelope(JSON.stringify(env)).dedupKey).toHaveLength(256);
  });

  it.each([
    ['empty', ''],
    ['129 characters', 'i'.repeat(129)],
    ['a line break', 'id-1\nlevel=ERROR forged'],
    ['a tab', 'id\t1'],
    ['an escape sequence', '\u001b[31mred'],
    ['a NUL', 'id\u00001'],
    ['a character outside ASCII', 'id-\u00e9'],
    ['a bidi override', 'id-\u202e1'],
    ['a leading space', ' id-1'],
    ['a trailing space', 'id-1 '],
    ['a number', 42],
  ])('refuses an id with %s as bad-schema, naming the id', (_what, id) => {
    const body = JSON.stringify({ ...valid(), id });
    expect(problemOf(body)).toBe('bad-schema');
    expect(() => parseEnvelope(body)).toThrow(/invalid leaseq envelope: id: /);
  });

  it.each([
    ['a UUID (what the producer API makes)', '6f1c2b7e-3d1a-4a55-9d0e-2b8f0c4e9a11'],
    ['128 characters', 'i'.repeat(128)],
    ['a send --file key with inner spaces and punctuation', 'run-mx4 order #12/a@b.co:1'],
  ])('accepts an id that is %s', (_what, id) => {
    expect(parseEnvelope(JSON.stringify({ ...valid(), id })).id).toBe(id);
  });

  it.each([
    ['not a traceparent', 'nope'],
    [
      'version ff (forbidden by W3C Trace Context)',
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    ],
    ['an all-zero trace id', '00-00000000000000000000000000000000-00f067aa0ba902b7-01'],
    ['an all-zero parent id', '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'],
    ['upper-case hex', '00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01'],
    ['a short trace id', '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01'],
    ['trailing text', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nx'],
    ['a number', 7],
    ['an object', { traceparent: 'x' }],
  ])('drops a trace that is %s and keeps the job', (_what, trace) => {
    const envelope = valid();
    const parsed = parseEnvelope(JSON.stringify({ ...envelope, trace }));

    expect(parsed).not.toHaveProperty('trace');
    expect(parsed).toEqual(envelope);
    expect(isValidTraceparent(trace)).toBe(false);
  });

  it.each([
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00',
    // A later version is parsed like version 00 (the spec's forward compatibility).
    'fe-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  ])('keeps a valid traceparent %s', (trace) => {
    expect(parseEnvelope(JSON.stringify({ ...valid(), trace })).trace).toBe(trace);
    expect(isValidTraceparent(trace)).toBe(true);
  });
});
