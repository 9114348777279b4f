import { describe, expect, it } from 'vitest';
import { readEditedPayload } from '../../../cli/ui/fix-page.ts';
import { DEFAULT_MAX_BODY_BYTES } from '../../../shared/core/contract/envelope.ts';

describe('Function: readEditedPayload', () => {
  it('holds the payload to the body limit as it is sent (compact), not as the form shows it (indented)', () => {
    // 120,000 short strings: about 600 KB as sent, twice that indented in the textarea.
    const value = { tags: Array.from({ length: 120_000 }, (_, i) => `t${i % 10}`) };
    const shown = JSON.stringify(value, null, 2);
    expect(Buffer.byteLength(JSON.stringify(value))).toBeLessThan(DEFAULT_MAX_BODY_BYTES);
    expect(Buffer.byteLength(shown)).toBeGreaterThan(DEFAULT_MAX_BODY_BYTES);
    expect(readEditedPayload(shown)).toEqual({ value });
  });

  it('refuses a payload above the body limit as sent, saying its size', () => {
    const value = { blob: 'x'.repeat(DEFAULT_MAX_BODY_BYTES) };
    const answer = readEditedPayload(JSON.stringify(value));
    expect(answer).toEqual({ problem: expect.stringContaining('above the') });
  });
});
