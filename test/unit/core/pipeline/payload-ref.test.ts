import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type { PayloadRef, PayloadStore } from '../../../../shared/core/contract/payload-store.ts';
import { withPayload } from '../../../../shared/core/pipeline/payload-ref.ts';
import { InvalidEnvelopeError } from '../../../../shared/errors.ts';

const KEY = 'payloads/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f10.json';
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** A pointer envelope to `ref`. */
function pointer(ref: PayloadRef) {
  const { payload: _p, ...rest } = makeEnvelope({ id: 'j1', dedupKey: 'k1', type: 't', payload: null });
  return { ...rest, payloadRef: ref };
}

/** A ref to `text` as the producer writes it. */
function refTo(text: string, key = KEY): PayloadRef {
  return { bucket: 'b-payloads', key, bytes: Buffer.byteLength(text), sha256: sha256(text) };
}

/** A store whose every object holds `text`; `options` as a worker configures it. */
function storeOf(text: string, options: { maxBytes?: number; keyPrefix?: string } = {}): PayloadStore {
  return {
    bucket: 'b-payloads',
    ...options,
    put: async () => refTo(''),
    get: async () => text,
  };
}

async function refusal(promise: Promise<unknown>): Promise<InvalidEnvelopeError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InvalidEnvelopeError);
  return error as InvalidEnvelopeError;
}

describe('Pipeline: withPayload (claim check)', () => {
  it('reads the payload of a pointer whose size, hash and key are what the producer wrote', async () => {
    const text = JSON.stringify({ amount: 100 });
    const out = await withPayload(pointer(refTo(text)), storeOf(text));
    expect(out.payload).toEqual({ amount: 100 });
    expect(out.payloadRef).toBeUndefined();
  });

  it('refuses (too-large) an object larger than the pointer says, before parsing it', async () => {
    const big = JSON.stringify('x'.repeat(5_000_000));
    const error = await refusal(withPayload(pointer({ ...refTo('{}'), bytes: 12 }), storeOf(big)));
    expect(error.problem).toBe('too-large');
    expect(error.message).toMatch(/5000002 bytes, the pointer says 12/);
  });

  it('refuses (too-large) a pointer over the cap without reading the object', async () => {
    let reads = 0;
    const store = { ...storeOf('{}', { maxBytes: 1000 }), get: async () => String(++reads) };
    const error = await refusal(withPayload(pointer({ ...refTo('{}'), bytes: 1001 }), store));
    expect(error.problem).toBe('too-large');
    expect(error.message).toMatch(/1001 bytes, above the 1000 byte limit of large payloads/);
    expect(reads).toBe(0);
  });

  it('refuses (payload-changed) an object overwritten after the send with the same size: the pointer pins its sha256', async () => {
    const sent = JSON.stringify({ amount: 100 });
    const overwritten = JSON.stringify({ amount: 999 });
    const error = await refusal(withPayload(pointer(refTo(sent)), storeOf(overwritten)));
    expect(error.problem).toBe('payload-changed');
    expect(error.message).toMatch(/sha256/);
  });

  it.each([
    ['outside the prefix', '../other-tenant/secret.json'],
    ['another prefix', 'other/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f10.json'],
    ['under the prefix but not a producer key', 'payloads/../../x.json'],
    ['a path in the date', 'payloads/2025-01-01/x/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f10.json'],
  ])('does not follow a hostile pointer (%s)', async (_what, key) => {
    let reads = 0;
    const store = { ...storeOf('{}'), get: async () => String(++reads) };
    const error = await refusal(withPayload(pointer(refTo('{}', key)), store));
    expect(error.problem).toBe('bad-schema');
    expect(reads).toBe(0);
  });

  it('follows keys under the prefix the worker is configured with', async () => {
    const key = 'big/2025-01-01/0b6c2c3e-8f7e-4f3b-9a43-0c8e5a7a2f10.json';
    const out = await withPayload(pointer(refTo('7', key)), storeOf('7', { keyPrefix: 'big/' }));
    expect(out.payload).toBe(7);
  });
});
