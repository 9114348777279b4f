import {
  type Attributes,
  type Context,
  context,
  createContextKey,
  INVALID_SPAN_CONTEXT,
  isSpanContextValid,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { describe, errorClass } from '../../error-text.ts';

/*
 * Tracing through the OpenTelemetry API only: without an SDK registered (the default) every span is a
 * no-op. The worker registers one when the standard OTEL_* variables ask for it (shared/worker/tracing.ts);
 * a producer's application registers its own. Span attributes never carry payloads or dedup keys.
 */

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

export { SpanKind };

/** leaseq's tracer (resolved per call: an SDK registered later still takes effect). */
export function leaseqTracer() {
  return trace.getTracer('leaseq');
}

/** The remote parent a W3C `traceparent` names, as a context; the root context when it is absent or bad. */
export function contextFromTraceparent(traceparent: string | undefined): Context {
  const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (!match?.[1] || !match[2] || !match[3]) return ROOT_CONTEXT;
  const spanContext = {
    traceId: match[1],
    spanId: match[2],
    traceFlags: Number.parseInt(match[3], 16),
    isRemote: true,
  };
  return isSpanContextValid(spanContext) ? trace.setSpanContext(ROOT_CONTEXT, spanContext) : ROOT_CONTEXT;
}

/** The W3C `traceparent` of a span, or undefined for a span no SDK records (invalid context). */
export function traceparentOf(span: Span): string | undefined {
  const c = span.spanContext();
  if (!isSpanContextValid(c)) return undefined;
  return `00-${c.traceId}-${c.spanId}-${c.traceFlags.toString(16).padStart(2, '0')}`;
}

/**
 * Marks a span failed with the error: its class, and `text` (the status message and the exception
 * event's message; no stack, no payload). `text` defaults to describe(error): capped, not redacted; the
 * pipeline passes its Settings.errorText (the deployment's redactError applied).
 */
export function recordFailure(span: Span, error: unknown, text: (error: unknown) => string = describe): void {
  const message = text(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.setAttribute('error.type', errorClass(error));
  if (error instanceof Error) span.recordException({ name: errorClass(error), message });
}

/** The tracer provider the API's global proxy delegates to while no SDK is registered. */
const NO_SDK = new ProxyTracerProvider().getDelegate();
/** A context only a registered context manager makes active (the API's default one never does). */
const PROBE = ROOT_CONTEXT.setValue(createContextKey('leaseq.tracing.probe'), true);
const probeIsActive = () => context.active() === PROBE;
/** What a no-op tracer hands out for a span without a valid parent. */
const INVALID_SPAN = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * True when tracing is entirely off: no SDK behind the global tracer provider and no context manager,
 * so a span is a non-recording one nobody can see (context.with does not even make it active). Checked
 * per call, so an SDK or context manager registered later still takes effect.
 */
export function tracingIsOff(): boolean {
  const provider = trace.getTracerProvider();
  return (
    provider instanceof ProxyTracerProvider &&
    provider.getDelegate() === NO_SDK &&
    !context.with(PROBE, probeIsActive)
  );
}

/**
 * Runs `fn` in a child span of the active context (or `parent`): ended when `fn` settles, failed when
 * it throws (the error is rethrown). With tracing off (no SDK, no context manager) `fn` gets the
 * non-recording span a no-op tracer would give, without the tracer, span and context work per call.
 */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  options: {
    readonly parent?: Context;
    readonly kind?: SpanKind;
    /** The failure's text on the span (recordFailure). @default describe */
    readonly errorText?: (error: unknown) => string;
  } = {},
): Promise<T> {
  if (tracingIsOff()) return await fn(noopSpan(options.parent));
  const parent = options.parent ?? context.active();
  const span = leaseqTracer().startSpan(
    name,
    { attributes, kind: options.kind ?? SpanKind.INTERNAL },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (error) {
    recordFailure(span, error, options.errorText);
    throw error;
  } finally {
    span.end();
  }
}

/** The span a no-op tracer starts under `parent`: its valid span context, non-recording; else invalid. */
function noopSpan(parent: Context | undefined): Span {
  const parentContext = parent ? trace.getSpanContext(parent) : undefined;
  return parentContext && isSpanContextValid(parentContext)
    ? trace.wrapSpanContext(parentContext)
    : INVALID_SPAN;
}
