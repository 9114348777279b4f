import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import {
  durationArg,
  formatDuration,
  formatErrorText,
  formatInstant,
  formatLease,
  formatRelative,
  fractionArg,
  integerArg,
  listArg,
  rateArg,
  renderFields,
  renderTable,
  truncate,
} from '../../../cli/format.ts';

describe('Function: formatDuration', () => {
  it('picks the unit by size', () => {
    expect(formatDuration(0)).toBe('0ms');
    expect(formatDuration(850)).toBe('850ms');
    expect(formatDuration(12_345)).toBe('12.3s');
    expect(formatDuration(59_999)).toBe('59.9s');
    expect(formatDuration(245_000)).toBe('4m 05s');
    expect(formatDuration(3 * 3600_000 + 4 * 60_000 + 59_000)).toBe('3h 04m');
    expect(formatDuration(2 * 86_400_000 + 3 * 3600_000)).toBe('2d 03h');
  });
  it('shows the size of a negative duration', () => {
    expect(formatDuration(-12_345)).toBe('12.3s');
  });
});

describe('Function: formatRelative / formatLease / formatInstant', () => {
  const now = Date.parse('2024-05-01T12:00:00.000Z');
  it('says in or ago', () => {
    expect(formatRelative(now + 5000, now)).toBe('in 5.0s');
    expect(formatRelative(now - 90_000, now)).toBe('1m 30s ago');
  });
  it('says left or expired', () => {
    expect(formatLease(2500)).toBe('2.5s left');
    expect(formatLease(-61_000)).toBe('expired 1m 01s ago');
    expect(formatLease(0)).toBe('expired 0ms ago');
  });
  it('shows an instant as ISO plus its distance, from epoch ms or ISO', () => {
    expect(formatInstant(now - 2000, now)).toBe('2024-05-01T11:59:58.000Z (2.0s ago)');
    expect(formatInstant('2024-05-01T12:01:00Z', now)).toBe('2024-05-01T12:01:00.000Z (in 1m 00s)');
    expect(formatInstant(undefined, now)).toBeUndefined();
    expect(formatInstant('not a date', now)).toBe('not a date');
  });
  it('shows an instant no calendar holds as its number, not a RangeError (an item is read as stored)', () => {
    expect(formatInstant(9e15, now)).toBe('9000000000000000 (not a date)');
    expect(formatInstant(-9e15, now)).toBe('-9000000000000000 (not a date)');
  });
});

describe('Function: renderTable', () => {
  it('aligns columns, right-aligns numbers, trims trailing blanks', () => {
    const text = renderTable(
      [{ header: 'WORKER' }, { header: 'DONE', align: 'right' }, { header: 'NOTE' }],
      [
        ['w-1', '7', ''],
        ['worker-22', '1234', 'slow'],
      ],
    );
    expect(text.split('\n')).toEqual(['WORKER     DONE  NOTE', 'w-1           7', 'worker-22  1234  slow']);
  });
  it('cuts long cells and flattens newlines', () => {
    const text = renderTable([{ header: 'E', max: 8 }], [['line one\nline two']]);
    expect(text.split('\n')[1]).toBe('line on…');
  });
});

describe('Function: renderFields', () => {
  it('aligns labels and leaves out undefined values', () => {
    expect(
      renderFields([
        ['a', '1'],
        ['long label', '2'],
        ['gone', undefined],
      ]),
    ).toBe('a:          1\nlong label: 2');
  });
});

describe('Function: truncate / formatErrorText', () => {
  it('cuts with an ellipsis only when needed', () => {
    expect(truncate('abc', 3)).toBe('abc');
    expect(truncate('abcd', 3)).toBe('ab…');
  });
  it('does not repeat the error class', () => {
    expect(formatErrorText('PermanentJobError', 'PermanentJobError: boom')).toBe('PermanentJobError: boom');
    expect(formatErrorText('TypeError', 'boom')).toBe('TypeError: boom');
    expect(formatErrorText(undefined, 'boom')).toBe('boom');
  });
});

describe('Flag parsers', () => {
  it('integerArg accepts integers in range only', () => {
    const count = integerArg(1, 100);
    expect(count('20')).toBe(20);
    for (const bad of ['-3', '0', '101', '2.5', 'ten', '', '1e2']) {
      expect(() => count(bad), bad).toThrow(InvalidArgumentError);
    }
    expect(() => count('-3')).toThrow('expected an integer from 1 to 100');
  });
  it('fractionArg accepts 0..1 and percentages', () => {
    expect(fractionArg('0.25')).toBe(0.25);
    expect(fractionArg('0')).toBe(0);
    expect(fractionArg('1')).toBe(1);
    expect(fractionArg('20%')).toBeCloseTo(0.2);
    for (const bad of ['2', '-0.1', 'x', '', '150%'])
      expect(() => fractionArg(bad), bad).toThrow(InvalidArgumentError);
  });
  it('rateArg returns messages per second', () => {
    expect(rateArg('50')).toBe(50);
    expect(rateArg('600/min')).toBe(10);
    expect(() => rateArg('0')).toThrow(InvalidArgumentError);
    expect(() => rateArg('fast')).toThrow(/50\/s/);
  });
  it('durationArg returns milliseconds; a bare number is seconds', () => {
    expect(durationArg('90')).toBe(90_000);
    expect(durationArg('10m')).toBe(600_000);
    expect(durationArg('500ms')).toBe(500);
    expect(durationArg('1h')).toBe(3_600_000);
    for (const bad of ['0', '-1s', '5d', 'soon'])
      expect(() => durationArg(bad), bad).toThrow(InvalidArgumentError);
  });
  it('listArg keeps allowed items once, in order', () => {
    const types = listArg(['a', 'b', 'c'] as const);
    expect(types('b, a,b')).toEqual(['b', 'a']);
    expect(() => types('a,z')).toThrow('unknown z; expected a comma-separated list of a, b, c');
    expect(() => types(',')).toThrow(InvalidArgumentError);
  });
});
