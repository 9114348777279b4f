import { type Context, type ContextManager, context, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { contextFromTraceparent, inSpan, tracingIsOff } from '../../../../shared/core/observe/spans.ts';

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** A context manager that follows synchronous calls only: enough to see what `fn` starts under. */
class StackContextManager implements ContextManager {
  #stack: Context[] = [];
  active(): Context {
    return this.#stack.at(-1) ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    this.#stack.push(ctx);
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.#stack.pop();
    }
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#stack = [];
    return this;
  }
}

afterEach(() => {
  trace.disable();
  context.disable();
});

describe('inSpan', () => {
  it('with tracing off, runs fn with a non-recording span that keeps the remote parent, and rethrows', async () => {
    expect(tracingIsOff()).toBe(true);
    const parent = contextFromTraceparent(TRACEPARENT);
    const seen = await inSpan('x', {}, async (span) => span, { parent });
    expect(seen.isRecording()).toBe(false);
    expect(seen.spanContext().traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(seen.spanContext().spanId).toBe('00f067aa0ba902b7');
    const orphan = await inSpan('x', {}, async (span) => span);
    expect(orphan.spanContext().traceId).toBe('00000000000000000000000000000000');
    await expect(
      inSpan('x', {}, async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
  });

  it('records spans once an SDK is registered, also after tracing was off', async () => {
    await inSpan('before', {}, async () => undefined);
    const exporter = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
    expect(tracingIsOff()).toBe(false);
    await inSpan('after', { a: 1 }, async (span) => span.setAttribute('b', 2), {
      parent: contextFromTraceparent(TRACEPARENT),
    });
    await expect(
      inSpan('failed', {}, async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['after', 'failed']);
    expect(spans[0]?.attributes).toEqual({ a: 1, b: 2 });
    expect(spans[0]?.spanContext().traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(spans[0]?.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(spans[1]?.status.code).toBe(2); // SpanStatusCode.ERROR
  });

  it('with a context manager but no SDK, makes the parent-carrying span active inside fn', async () => {
    context.setGlobalContextManager(new StackContextManager());
    expect(tracingIsOff()).toBe(false);
    const active = await inSpan('x', {}, async () => trace.getActiveSpan(), {
      parent: contextFromTraceparent(TRACEPARENT),
    });
    expect(active?.spanContext().traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
  });
});
