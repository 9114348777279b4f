import { describe, expect, it } from 'vitest';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import type { PayloadStore } from '../../../shared/core/contract/payload-store.ts';
import { ClaimCheck } from '../../../shared/producer/large-payloads.ts';

describe('Producer: ClaimCheck maxBytes', () => {
  it('refuses a payload above largePayloads.maxBytes in one line, putting nothing', async () => {
    let puts = 0;
    const store: PayloadStore = {
      bucket: 'b-payloads',
      put: async () => {
        puts++;
        return { bucket: 'b-payloads', key: 'k', bytes: 0, sha256: '0'.repeat(64) };
      },
      get: async () => '',
    };
    const check = new ClaimCheck({ store, maxBytes: 1500 });
    const envelope = makeEnvelope({ id: 'j', dedupKey: 'k', type: 't', payload: 'x'.repeat(2000) });
    const [result] = await check.apply([envelope], 1024);
    expect(result?.status).toBe('rejected');
    expect(String((result as PromiseRejectedResult).reason.message)).toBe(
      'payload is 2002 bytes, above the 1500 byte limit of large payloads (largePayloads.maxBytes)',
    );
    expect(puts).toBe(0);
  });
});
