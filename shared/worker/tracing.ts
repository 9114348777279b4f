import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/** A registered trace pipeline: flush it before an invocation returns (Lambda freezes the process). */
export interface WorkerTracing {
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

let started: WorkerTracing | undefined;

/**
 * Starts OpenTelemetry tracing for this process when the standard variables ask for it: an OTLP/HTTP
 * exporter (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`; the exporter reads
 * the other `OTEL_EXPORTER_OTLP_*` settings itself), service name from `OTEL_SERVICE_NAME`. Off when no
 * endpoint is set, when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. Once per process.
 */
export function startTracingFromEnv(env: NodeJS.ProcessEnv = process.env): WorkerTracing | undefined {
  if (started) return started;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!endpoint || env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return undefined;
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME?.trim() || 'leaseq-worker' }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // The global tracer provider, the AsyncLocalStorage context manager (spans follow awaits) and the W3C
  // propagator: leaseq's spans, and the job's own, go to this exporter.
  provider.register();
  started = { flush: () => provider.forceFlush(), shutdown: () => provider.shutdown() };
  return started;
}
