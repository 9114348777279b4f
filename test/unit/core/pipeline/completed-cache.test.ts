import { describe, expect, it } from 'vitest';
import { CompletedCache } from '../../../../shared/core/pipeline/completed-cache.ts';

describe('Class: CompletedCache', () => {
  it('forgets entries after their TTL', () => {
    let now = 0;
    const cache = new CompletedCache({ ttlMs: 100, now: () => now });
    cache.add('a');
    now = 99;
    expect(cache.has('a')).toBe(true);
    now = 100;
    expect(cache.has('a')).toBe(false);
  });

  it('evicts the least recently used entry when full', () => {
    const cache = new CompletedCache({ maxEntries: 2 });
    cache.add('a');
    cache.add('b');
    expect(cache.has('a')).toBe(true); // a is now the most recent
    cache.add('c');
    expect(cache.has('b')).toBe(false);
    expect(cache.has('a')).toBe(true);
    expect(cache.has('c')).toBe(true);
    expect(cache.size).toBe(2);
  });
});
