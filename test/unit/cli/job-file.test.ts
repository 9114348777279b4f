import { describe, expect, it } from 'vitest';
import { countRepeatedKeys, parseJobFile } from '../../../shared/ops/job-file.ts';
import { JobFileError } from '../../../shared/ops/ops-errors.ts';

const now = new Date('2024-05-01T12:00:00.000Z');
const known = (type: string) => type === 'ledger.credit' || type === 'ledger.transfer';
const envelope = {
  v: 1,
  id: 'e-1',
  dedupKey: 'order-1',
  type: 'ledger.credit',
  createdAt: '2024-04-30T10:00:00Z',
  payload: { account: 'a', amount: 1 },
};

function errorOf(fn: () => unknown): JobFileError {
  try {
    fn();
  } catch (error) {
    if (error instanceof JobFileError) return error;
    throw error;
  }
  throw new Error('expected a JobFileError');
}

describe('Function: parseJobFile', () => {
  it('reads NDJSON: envelopes as they are, specs wrapped with run-id keys by line number', () => {
    const text = [
      JSON.stringify(envelope),
      '',
      JSON.stringify({ type: 'ledger.credit', payload: { account: 'b', amount: 2 } }),
      JSON.stringify({ type: 'ledger.credit', payload: { account: 'b', amount: 2 }, dedupKey: 'order-1' }),
    ].join('\n');
    const jobs = parseJobFile(text, { runId: 'r', isKnownType: known, now });
    expect(jobs).toHaveLength(3);
    expect(jobs[0]).toEqual(envelope);
    expect(jobs[1]).toMatchObject({
      v: 1,
      id: 'r-000003',
      dedupKey: 'r-000003',
      type: 'ledger.credit',
      createdAt: '2024-05-01T12:00:00.000Z',
    });
    expect(jobs[2]?.dedupKey).toBe('order-1');
    expect(countRepeatedKeys(jobs)).toBe(1);
  });

  it('reads a JSON array', () => {
    const text = JSON.stringify([
      envelope,
      { type: 'ledger.transfer', payload: { from: 'a', to: 'b', amount: 3 } },
    ]);
    const jobs = parseJobFile(text, { runId: 'r', now });
    expect(jobs.map((j) => j.dedupKey)).toEqual(['order-1', 'r-000002']);
  });

  it('names the line of the first bad NDJSON entry', () => {
    const lines = [JSON.stringify(envelope), '{"type": "ledger.credit", "payload": 1', ''];
    const error = errorOf(() => parseJobFile(lines.join('\n'), { runId: 'r' }));
    expect(error.position).toBe(2);
    expect(error.message).toMatch(/^line 2: not JSON/);
  });

  it('refuses bad envelopes, unknown types, bad payloads and non-objects, with the position', () => {
    const cases: [string, RegExp][] = [
      [`${JSON.stringify({ ...envelope, v: 2 })}`, /^line 1: leaseq envelope version 2 is not supported/],
      [`${JSON.stringify({ ...envelope, dedupKey: '' })}`, /^line 1: invalid leaseq envelope: dedupKey/],
      [
        `${JSON.stringify({ type: 'ledger.debit', payload: {} })}`,
        /^line 1: job type ledger.debit is not registered/,
      ],
      [`${JSON.stringify({ payload: {} })}`, /^line 1: missing "type"/],
      [`${JSON.stringify({ type: 'ledger.credit' })}`, /^line 1: missing "payload"/],
      [
        `${JSON.stringify({ type: 'ledger.credit', payload: {}, dedupKey: 7 })}`,
        /"dedupKey" must be a string/,
      ],
      ['42', /^line 1: expected a JSON object/],
      [JSON.stringify([envelope, 'x']), /^entry 2: expected a JSON object/],
    ];
    for (const [text, pattern] of cases) {
      expect(() => parseJobFile(text, { runId: 'r', isKnownType: known }), text).toThrow(pattern);
    }
  });

  it('reports payload problems from the checker', () => {
    const text = JSON.stringify({ type: 'ledger.credit', payload: { amount: -1 } });
    expect(() =>
      parseJobFile(text, {
        runId: 'r',
        checkPayload: (type) => (type === 'ledger.credit' ? 'amount: too small' : undefined),
      }),
    ).toThrow('line 1: payload of ledger.credit: amount: too small');
  });

  it("takes bodies up to the limit it is given (default: the queue's) and names size and limit above it", () => {
    const spec = (bytes: number) =>
      JSON.stringify({ type: 'ledger.credit', payload: { account: 'a', amount: 1, pad: 'x'.repeat(bytes) } });
    expect(parseJobFile(`${spec(300_000)}\n${spec(900_000)}`, { runId: 'r' })).toHaveLength(2);
    expect(() => parseJobFile(spec(1_100_000), { runId: 'r' })).toThrow(
      /^line 1: body is 1100\d{3} bytes, above the 1015808 byte limit/,
    );
    expect(() => parseJobFile(spec(20_000), { runId: 'r', maxBodyBytes: 10_000 })).toThrow(
      /^line 1: body is 20\d{3} bytes, above the 10000 byte limit/,
    );
  });

  it('refuses an empty file and a broken array as a whole', () => {
    expect(() => parseJobFile('\n\n', { runId: 'r' })).toThrow('no jobs found');
    expect(() => parseJobFile('[]', { runId: 'r' })).toThrow('no jobs found');
    expect(() => parseJobFile('[{"v":1', { runId: 'r' })).toThrow(/^not a valid JSON array/);
  });
});
