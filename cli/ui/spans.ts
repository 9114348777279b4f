/**
 * The inspector's trace intake: OTLP/HTTP with JSON bodies (what @opentelemetry/exporter-trace-otlp-http,
 * the workers' exporter, sends), kept as the last N spans in memory. Only what the waterfall needs is
 * kept: ids, name, service, times, status and leaseq's few attributes; no other attribute (a job's own
 * spans may carry anything) and no event is stored.
 */

/** One span as the waterfall draws it. */
export interface UiSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly service: string;
  /** Epoch ms (fractional). */
  readonly start: number;
  readonly end: number;
  readonly status: 'ok' | 'error' | 'unset';
  /** The SQS message id the span processed or sent (`messaging.message.id`): how spans meet a job. */
  readonly messageId?: string;
  readonly outcome?: string;
}

/** Attributes kept: none of them carries a payload or a dedup key (shared/core/observe/spans.ts). */
const KEPT = new Set(['messaging.message.id', 'leaseq.outcome']);

/**
 * `value` cut to `max` characters, as a string of its own: V8 keeps a slice's parent alive, so a kept
 * slice of a 4 MB name would hold all 4 MB (anyone on the machine may post spans).
 */
function short(value: string, max: number): string {
  return Buffer.from(value.slice(0, max), 'utf8').toString('utf8');
}

/** A request body that is not OTLP JSON. */
export class OtlpFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OtlpFormatError';
  }
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};
type KeyValue = { key?: string; value?: AnyValue };

function attributeText(value: AnyValue | undefined): string | undefined {
  if (!value) return undefined;
  if (value.stringValue !== undefined) return String(value.stringValue);
  if (value.intValue !== undefined) return String(value.intValue);
  if (value.doubleValue !== undefined) return String(value.doubleValue);
  if (value.boolValue !== undefined) return String(value.boolValue);
  return undefined;
}

function attributes(list: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (!Array.isArray(list)) return out;
  for (const kv of list as KeyValue[]) {
    const text = attributeText(kv?.value);
    if (typeof kv?.key === 'string' && text !== undefined) out.set(kv.key, text);
  }
  return out;
}

/** Nanoseconds (a decimal string or a number) as epoch ms. */
function nanosToMs(value: unknown): number {
  if (typeof value === 'number') return value / 1e6;
  if (typeof value === 'string' && /^\d+$/.test(value)) {
    // Split so the integer part stays exact beyond 2^53 ns.
    return Number(value.slice(0, -6) || '0') + Number(value.slice(-6)) / 1e6;
  }
  return Number.NaN;
}

/** OTLP JSON carries ids as hex (the spec); some exporters send base64. Both become lower-case hex. */
function hexId(value: unknown): string | undefined {
  if (typeof value !== 'string' || value === '') return undefined;
  if (/^[0-9a-fA-F]+$/.test(value) && (value.length === 32 || value.length === 16))
    return value.toLowerCase();
  const bytes = Buffer.from(value, 'base64');
  return bytes.length === 16 || bytes.length === 8 ? bytes.toString('hex') : undefined;
}

/**
 * Reads an ExportTraceServiceRequest in OTLP JSON.
 * @throws OtlpFormatError when the body is not one.
 */
export function parseOtlpJson(body: unknown): UiSpan[] {
  if (
    typeof body !== 'object' ||
    body === null ||
    !Array.isArray((body as { resourceSpans?: unknown }).resourceSpans)
  ) {
    throw new OtlpFormatError('expected an OTLP JSON ExportTraceServiceRequest ({"resourceSpans": [...]})');
  }
  const spans: UiSpan[] = [];
  for (const rs of (body as { resourceSpans: unknown[] }).resourceSpans) {
    const r = rs as { resource?: { attributes?: unknown }; scopeSpans?: unknown };
    const service = attributes(r?.resource?.attributes).get('service.name') ?? 'unknown';
    for (const ss of Array.isArray(r?.scopeSpans) ? r.scopeSpans : []) {
      const list = (ss as { spans?: unknown })?.spans;
      for (const raw of Array.isArray(list) ? list : []) {
        const s = raw as Record<string, unknown>;
        const traceId = hexId(s.traceId);
        const spanId = hexId(s.spanId);
        const start = nanosToMs(s.startTimeUnixNano);
        const end = nanosToMs(s.endTimeUnixNano);
        if (!traceId || !spanId || !Number.isFinite(start) || !Number.isFinite(end)) continue;
        const attrs = attributes(s.attributes);
        const code = (s.status as { code?: unknown } | undefined)?.code;
        const parent = hexId(s.parentSpanId);
        const kept = Object.fromEntries([...attrs].filter(([k]) => KEPT.has(k)));
        spans.push({
          traceId,
          spanId,
          ...(parent ? { parentSpanId: parent } : {}),
          name: typeof s.name === 'string' ? short(s.name, 200) : '(unnamed)',
          service: short(service, 100),
          start,
          end: Math.max(start, end),
          status:
            code === 2 || code === 'STATUS_CODE_ERROR'
              ? 'error'
              : code === 1 || code === 'STATUS_CODE_OK'
                ? 'ok'
                : 'unset',
          // An SQS message id is 100 characters at most; an outcome is one short word.
          ...(kept['messaging.message.id'] ? { messageId: short(kept['messaging.message.id'], 100) } : {}),
          ...(kept['leaseq.outcome'] ? { outcome: short(kept['leaseq.outcome'], 40) } : {}),
        });
      }
    }
  }
  return spans;
}

/** The last `capacity` spans received, oldest dropped first. */
export class SpanBuffer {
  readonly #spans: UiSpan[] = [];
  #received = 0;

  constructor(readonly capacity = 5000) {}

  add(spans: readonly UiSpan[]): void {
    this.#received += spans.length;
    this.#spans.push(...spans);
    if (this.#spans.length > this.capacity) this.#spans.splice(0, this.#spans.length - this.capacity);
  }

  get size(): number {
    return this.#spans.length;
  }

  /** Spans received since the start, kept or not. */
  get received(): number {
    return this.#received;
  }

  /**
   * A job's spans: those that processed or sent one of its messages, and every span of the traces they
   * belong to (the producer's send, the job's own spans), ordered by start.
   */
  forMessages(messageIds: Iterable<string>): UiSpan[] {
    const wanted = new Set(messageIds);
    const traces = new Set(
      this.#spans.filter((s) => s.messageId && wanted.has(s.messageId)).map((s) => s.traceId),
    );
    return this.#spans.filter((s) => traces.has(s.traceId)).sort((a, b) => a.start - b.start);
  }
}
