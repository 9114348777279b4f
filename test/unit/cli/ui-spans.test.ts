import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { OtlpFormatError, parseOtlpJson, SpanBuffer, type UiSpan } from '../../../cli/ui/spans.ts';
import { waterfall } from '../../../cli/ui/waterfall.ts';

const attr = (key: string, value: string) => ({ key, value: { stringValue: value } });

function request(spans: object[], service = 'leaseq-worker') {
  return {
    resourceSpans: [
      {
        resource: { attributes: [attr('service.name', service)] },
        scopeSpans: [{ scope: { name: 'leaseq' }, spans }],
      },
    ],
  };
}

const span = (over: Record<string, unknown> = {}) => ({
  traceId: 'a'.repeat(32),
  spanId: 'b'.repeat(16),
  name: 'leaseq.process ledger.credit',
  kind: 5,
  startTimeUnixNano: '1700000000000000000',
  endTimeUnixNano: '1700000000012500000',
  attributes: [
    attr('messaging.message.id', 'm-1'),
    attr('leaseq.outcome', 'completed'),
    attr('app.secret', 'payload-ish'),
  ],
  status: { code: 0 },
  ...over,
});

describe('leaseq ui trace intake (OTLP JSON)', () => {
  it('reads ids, times, service, status and the message id; keeps no other attribute', () => {
    const [s] = parseOtlpJson(request([span({ parentSpanId: 'c'.repeat(16), status: { code: 2 } })]));
    expect(s).toEqual({
      traceId: 'a'.repeat(32),
      spanId: 'b'.repeat(16),
      parentSpanId: 'c'.repeat(16),
      name: 'leaseq.process ledger.credit',
      service: 'leaseq-worker',
      start: 1_700_000_000_000,
      end: 1_700_000_000_012.5,
      status: 'error',
      messageId: 'm-1',
      outcome: 'completed',
    });
    expect(JSON.stringify(s)).not.toContain('payload-ish');
  });

  it('accepts base64 ids and numeric nanoseconds; skips spans without ids or times', () => {
    const ids = {
      traceId: Buffer.alloc(16, 1).toString('base64'),
      spanId: Buffer.alloc(8, 2).toString('base64'),
    };
    const out = parseOtlpJson(
      request([
        span({ ...ids, startTimeUnixNano: 5e6, endTimeUnixNano: 6e6 }),
        span({ spanId: '' }),
        span({ startTimeUnixNano: 'x' }),
      ]),
    );
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({ traceId: '01'.repeat(16), spanId: '02'.repeat(8), start: 5, end: 6 });
  });

  it('refuses a body that is not an OTLP request', () => {
    expect(() => parseOtlpJson({ spans: [] })).toThrow(OtlpFormatError);
    expect(() => parseOtlpJson(null)).toThrow(OtlpFormatError);
  });

  it("keeps the last N spans and finds a job's traces by message id", () => {
    const buffer = new SpanBuffer(3);
    const t = (trace: string, id: string, message?: string, start = 0) => ({
      traceId: trace.repeat(32),
      spanId: id.repeat(16),
      name: id,
      service: 's',
      start,
      end: start + 1,
      status: 'unset' as const,
      ...(message ? { messageId: message } : {}),
    });
    buffer.add([t('1', 'a', 'm-old')]);
    buffer.add([t('2', 'b', 'm-job', 5), t('2', 'c', undefined, 1), t('3', 'd', 'm-other')]);
    expect(buffer.size).toBe(3);
    expect(buffer.received).toBe(4);
    expect(buffer.forMessages(['m-old'])).toEqual([]);
    // The whole trace of a matching span, by start: the producer's send (no message id here) first.
    expect(buffer.forMessages(['m-job']).map((s) => s.name)).toEqual(['c', 'b']);
  });

  it('bounds the memory of the kept spans, not only their count: huge names and attributes are cut and not held', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heap = () => {
      gc();
      return process.memoryUsage().heapUsed;
    };
    const buffer = new SpanBuffer(40);
    const before = heap();
    // Anyone on the machine may POST spans: 40 kept spans of 3 MB of strings each must not keep 120 MB.
    for (let i = 0; i < 40; i += 1) {
      const big = (c: string) => `${c}${i}`.repeat(250_000);
      const body = JSON.stringify(
        request(
          [
            span({
              spanId: i.toString(16).padStart(16, '0'),
              name: big('n'),
              attributes: [attr('messaging.message.id', big('m')), attr('leaseq.outcome', big('o'))],
            }),
          ],
          big('s'),
        ),
      );
      buffer.add(parseOtlpJson(JSON.parse(body)));
    }
    const kept = heap() - before;
    expect(buffer.size).toBe(40);
    expect(kept).toBeLessThan(8 * 1024 * 1024);
  });
});

describe('leaseq ui trace waterfall', () => {
  it("draws a span under its parent even when it started a fraction of a millisecond before it (the second attempt's claim)", () => {
    // Found in docs/ui-job.png: attempt 2's leaseq.claim, sorted by start, was drawn above its own
    // leaseq.process, indented as if it were a child of attempt 1's.
    const s = (spanId: string, name: string, start: number, end: number, parentSpanId?: string): UiSpan => ({
      traceId: 't',
      spanId,
      name,
      service: 'w',
      start,
      end,
      status: 'ok',
      ...(parentSpanId ? { parentSpanId } : {}),
    });
    const spans = [
      s('p1', 'process 1', 0, 30),
      s('c1', 'claim 1', 1, 12, 'p1'),
      s('c2', 'claim 2', 99.8, 108, 'p2'),
      s('p2', 'process 2', 100, 128),
      s('k2', 'commit 2', 110, 121, 'p2'),
    ];

    // Act
    const svg = waterfall(spans, spans.length);

    // Assess: rows in tree order, children indented under their own parent.
    const rows = [...svg.matchAll(/<text x="(\d+)" y="\d+">([a-z]+ \d)<\/text>/g)].map(
      (m) => `${m[1]} ${m[2]}`,
    );
    expect(rows).toEqual(['4 process 1', '16 claim 1', '4 process 2', '16 claim 2', '16 commit 2']);
  });
});
