import { describe, expect, it } from 'vitest';
import { changes, DIFF_MAX_CELLS, lineDiff } from '../../../cli/ui/diff.ts';
import { parseSearch, searchText } from '../../../cli/ui/search.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';

const now = Date.parse('2026-12-03T18:00:00.000Z');

describe('Function: parseSearch', () => {
  it('reads text with no filter in it as a dedup key, exactly as typed: spaces and colons are part of keys', () => {
    expect(parseSearch('  order-17  ', now)).toEqual({ kind: 'key', key: 'order-17' });
    expect(parseSearch('order:17 retry 2', now)).toEqual({ kind: 'key', key: 'order:17 retry 2' });
    expect(parseSearch('key:type:x', now)).toEqual({ kind: 'key', key: 'type:x' });
    expect(parseSearch('KEY: status:DEAD', now)).toEqual({ kind: 'key', key: 'status:DEAD' });
  });

  it('reads a key with one double quote in it as that key (no filter in it), and refuses an open quote in filters', () => {
    expect(parseSearch('order "42', now)).toEqual({ kind: 'key', key: 'order "42' });
    expect(parseSearch('"><img src=x>', now)).toEqual({ kind: 'key', key: '"><img src=x>' });
    expect(parseSearch('status:DEAD error:"open', now)).toEqual({
      kind: 'invalid',
      problem: 'a quote (") is not closed',
    });
  });

  it('refuses a key no envelope can carry, and says how to search error text instead', () => {
    const out = parseSearch('caf\u00e9', now);
    expect(out.kind).toBe('invalid');
    expect(out.kind === 'invalid' && out.problem).toContain('error:<text>');
    expect(parseSearch('key:', now)).toEqual({ kind: 'invalid', problem: expect.stringContaining('needs') });
  });

  it('reads filters in any order, any case of their names; words outside a filter are error text', () => {
    expect(
      parseSearch('Type:ledger.credit status:dead,stuck reason:max-attempts since:15m timeout', now),
    ).toEqual({
      kind: 'filter',
      filter: {
        type: 'ledger.credit',
        status: [JobStatus.Dead, 'stuck'],
        reason: 'max-attempts',
        since: now - 15 * 60_000,
        error: 'timeout',
      },
    });
    expect(parseSearch('error:"connection reset" status:COMPLETED(retried)', now)).toEqual({
      kind: 'filter',
      filter: { error: 'connection reset', status: [JobStatus.Completed] },
    });
  });

  it('takes since: as a duration back from now or an ISO 8601 time', () => {
    const at = (q: string) => {
      const out = parseSearch(q, now);
      return out.kind === 'filter' ? out.filter.since : out;
    };
    expect(at('since:90s')).toBe(now - 90_000);
    expect(at('since:7d')).toBe(now - 7 * 86_400_000);
    expect(at('since:2026-12-01T00:00:00Z')).toBe(Date.parse('2026-12-01T00:00:00Z'));
    expect(at('since:2024')).toEqual({ kind: 'invalid', problem: expect.stringContaining('since:2024') });
    expect(at('since:0m')).toEqual({ kind: 'invalid', problem: expect.stringContaining('duration') });
  });

  it('says what is wrong with a filter in one line', () => {
    expect(parseSearch('status:DONE', now)).toEqual({
      kind: 'invalid',
      problem: expect.stringMatching(
        /^status:DONE: expected a comma-separated list of IN_PROGRESS, RETRY_WAIT/,
      ),
    });
    expect(parseSearch('type: x', now)).toEqual({
      kind: 'invalid',
      problem: 'type: needs a value (type:<value>)',
    });
    expect(parseSearch('error:"open', now)).toEqual({
      kind: 'invalid',
      problem: 'a quote (") is not closed',
    });
    expect(parseSearch('type:a key:b', now).kind).toBe('invalid');
    expect(parseSearch('x'.repeat(2000), now).kind).toBe('invalid');
    expect(parseSearch('   ', now)).toEqual({ kind: 'empty' });
  });

  it('writes a filter back as text that reads as the same filter', () => {
    const parsed = parseSearch('type:a status:DEAD reason:max-attempts error:"lost lease" since:1h', now);
    expect(parsed.kind).toBe('filter');
    if (parsed.kind !== 'filter') return;
    expect(parseSearch(searchText(parsed.filter), now)).toEqual(parsed);
  });
});

describe('Function: lineDiff', () => {
  const before = JSON.stringify({ account: 'a-1', amount: 5, simulate: { failTimes: 1 } }, null, 2);
  const after = JSON.stringify({ account: 'a-1', amount: 7 }, null, 2);

  it('keeps the common lines and marks the removed and the added ones, in order', () => {
    const diff = lineDiff(before, after);
    expect(diff).toEqual([
      { op: 'same', text: '{' },
      { op: 'same', text: '  "account": "a-1",' },
      { op: 'del', text: '  "amount": 5,' },
      { op: 'del', text: '  "simulate": {' },
      { op: 'del', text: '    "failTimes": 1' },
      { op: 'del', text: '  }' },
      { op: 'add', text: '  "amount": 7' },
      { op: 'same', text: '}' },
    ]);
    expect(changes(diff)).toBe(5);
  });

  it('finds no change between equal texts', () => {
    expect(changes(lineDiff(before, before))).toBe(0);
  });

  it('shows a middle too large for its table as removed then added, without building the table', () => {
    const n = Math.ceil(Math.sqrt(DIFF_MAX_CELLS)) + 1;
    const a = Array.from({ length: n }, (_, i) => `a${i}`).join('\n');
    const b = Array.from({ length: n }, (_, i) => `b${i}`).join('\n');
    const diff = lineDiff(`{\n${a}\n}`, `{\n${b}\n}`);
    expect(diff.length).toBe(2 * n + 2);
    expect(diff[1]).toEqual({ op: 'del', text: 'a0' });
    expect(diff[n + 1]).toEqual({ op: 'add', text: 'b0' });
  });
});
