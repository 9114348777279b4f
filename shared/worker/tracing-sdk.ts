// The OpenTelemetry SDK and its OTLP exporter, imported only by tracing.ts when the environment turns
// tracing on: a worker without tracing never evaluates them at init (bench/cold-start.ts checks it).
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/** Registers the global tracer provider exporting to the OTLP endpoint the environment names. */
export function registerTracing(serviceName: string): { flush(): Promise<void>; shutdown(): Promise<void> } {
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // The global tracer provider, the AsyncLocalStorage context manager (spans follow awaits) and the W3C
  // propagator: leaseq's spans, and the job's own, go to this exporter.
  provider.register();
  return { flush: () => provider.forceFlush(), shutdown: () => provider.shutdown() };
}
