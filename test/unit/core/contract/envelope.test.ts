import { describe, expect, it } from 'vitest';
import { makeEnvelope, parseEnvelope } from '../../../../shared/core/contract/envelope.ts';
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
    expect(problemOf(JSON.stringify({ ...valid(), trace: 'nope' }))).toBe('bad-schema');
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
});
