import { createServer } from 'node:net';
import { InvalidPortError } from './emulator-errors.ts';

/** The only interface the embedded emulator listens on. */
export const LOOPBACK_HOST = '127.0.0.1';

/**
 * Parses a port from a flag or an environment variable. `undefined` and '' mean "not given".
 * @throws InvalidPortError for anything but an integer in 1..65535
 */
export function parsePort(value: string | number | undefined, source: string): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value).trim();
  if (text === '') return undefined;
  if (!/^\d+$/.test(text)) throw new InvalidPortError(text, source);
  const port = Number(text);
  if (port < 1 || port > 65_535) throw new InvalidPortError(text, source);
  return port;
}

/**
 * True when `host:port` can be bound right now. Binding (rather than connecting) also catches a
 * program that listens on 0.0.0.0 or that accepts no connections yet.
 */
export function isPortFree(port: number, host: string = LOOPBACK_HOST): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE' || error.code === 'EACCES') resolve(false);
      else reject(error);
    });
    server.listen({ port, host, exclusive: true }, () => {
      server.close(() => resolve(true));
    });
  });
}

/** Outcome of one HTTP probe of an endpoint. */
export type ProbeResult =
  | { readonly ok: true; readonly status: number }
  | { readonly ok: false; readonly reason: string };

/**
 * Sends one GET to `endpoint` and reports whether anything answered with HTTP within `timeoutMs`.
 * Any status counts as an answer (AWS and emulators answer `/` with 4xx): this checks reachability,
 * not credentials. Never throws and never takes longer than `timeoutMs` (plus a little).
 */
export async function probeHttp(endpoint: string, timeoutMs: number): Promise<ProbeResult> {
  try {
    const response = await fetch(endpoint, { method: 'GET', signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    return { ok: true, status: response.status };
  } catch (error) {
    return { ok: false, reason: describeFetchError(error, timeoutMs) };
  }
}

function describeFetchError(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) {
    return `no answer within ${(timeoutMs / 1000).toFixed(1)} s`;
  }
  const cause = error instanceof Error ? (error.cause as NodeJS.ErrnoException | undefined) : undefined;
  if (cause?.code) return cause.code === 'ECONNREFUSED' ? 'connection refused' : cause.code;
  if (error instanceof TypeError && error.message.includes('Invalid URL')) return 'not a valid URL';
  return error instanceof Error ? error.message : String(error);
}
