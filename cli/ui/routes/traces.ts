/** The trace intake `POST /v1/traces`: OTLP/HTTP JSON spans, with the trace token (the gate checks it). */
import { bodyLimit } from 'hono/body-limit';
import type { UiRoute } from '../context.ts';
import { OtlpFormatError, parseOtlpJson } from '../spans.ts';

/** Biggest OTLP request taken (a batch of the BatchSpanProcessor is far below). */
const TRACES_MAX_BYTES = 4 * 1024 * 1024;

export const tracesRoutes: UiRoute = (app, { config }) => {
  app.post(
    '/v1/traces',
    bodyLimit({ maxSize: TRACES_MAX_BYTES, onError: (c) => c.json({ error: 'request too large' }, 413) }),
    async (c) => {
      const type = (c.req.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
      if (type !== 'application/json') {
        return c.json(
          {
            error:
              'only OTLP/HTTP JSON is taken: set OTEL_EXPORTER_OTLP_PROTOCOL=http/json (leaseq workers send JSON already)',
          },
          415,
        );
      }
      try {
        config.spans.add(parseOtlpJson(await c.req.json()));
      } catch (error) {
        const message = error instanceof OtlpFormatError ? error.message : 'body is not JSON';
        return c.json({ error: message }, 400);
      }
      return c.json({});
    },
  );
};
