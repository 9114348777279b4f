/** A registered trace pipeline: flush it before an invocation returns (Lambda freezes the process). */
export interface WorkerTracing {
  /**
   * Resolves once the SDK is loaded and registered (spans before it go to the no-op tracer), or failed to
   * load: never rejects.
   */
  ready(): Promise<void>;
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
export function startTracingFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  onLoadError: (error: unknown) => void = () => undefined,
): WorkerTracing | undefined {
  if (started) return started;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!endpoint || env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return undefined;
  // Loaded on demand: the SDK and exporter are most of the bundle's tracing code, and a worker without
  // tracing must not pay for evaluating them at init.
  // A load that fails (the module left out of a bundle, an OTEL_* value the SDK throws on) turns tracing
  // off, reported once: traces are not worth a batch, and the promise is handled from init on (an
  // unhandled rejection before the first invocation would end the process).
  const registered = import('./tracing-sdk.ts')
    .then((sdk) => sdk.registerTracing(env.OTEL_SERVICE_NAME?.trim() || 'leaseq-worker'))
    .catch((error: unknown) => {
      onLoadError(error);
      return { flush: async () => undefined, shutdown: async () => undefined };
    });
  started = {
    ready: () => registered.then(() => undefined),
    flush: () => registered.then((t) => t.flush()),
    shutdown: () => registered.then((t) => t.shutdown()),
  };
  return started;
}
