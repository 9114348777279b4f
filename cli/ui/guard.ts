/**
 * The inspector's gate: a random token per start, the Host and Origin a request may carry. Pure, so the
 * rules are unit-tested apart from the server (test/unit/cli/ui-guard.test.ts).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';

/** The cookie that keeps the token after the first visit (HttpOnly, SameSite=Strict). */
export const TOKEN_COOKIE = 'leaseq_ui_token';

/** A fresh token: 32 random bytes, base64url (URL- and cookie-safe). */
export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Constant-time comparison; a missing or differently long value never matches. */
export function tokenMatches(given: string | undefined, token: string): boolean {
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The Host a request may name: the loopback address or `localhost`, with the port the server listens on.
 * Anything else is a DNS-rebinding page (evil.example resolving to 127.0.0.1) or a proxy: refused.
 */
export function hostAllowed(host: string | undefined, port: number): boolean {
  if (!host) return false;
  const h = host.toLowerCase();
  return h === `127.0.0.1:${port}` || h === `localhost:${port}`;
}

/**
 * The Origin a request may carry: none (a worker's exporter, curl, a top-level navigation by GET) or
 * this server's own. `null` (a sandboxed frame, a file: page) and other sites are refused.
 */
export function originAllowed(origin: string | undefined, port: number): boolean {
  if (origin === undefined) return true;
  return origin === `http://127.0.0.1:${port}` || origin === `http://localhost:${port}`;
}

/** The token a request carries: `?token=` (the printed URL) or the cookie. */
export function requestToken(
  query: string | undefined,
  cookieHeader: string | undefined,
): string | undefined {
  if (query) return query;
  for (const part of (cookieHeader ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === TOKEN_COOKIE) return value.join('=');
  }
  return undefined;
}

/** The Set-Cookie value that keeps the token for this server's pages only. */
export function tokenCookie(token: string): string {
  return `${TOKEN_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`;
}

export type GateVerdict = { readonly ok: true } | { readonly ok: false; readonly why: string };

/**
 * Whether a request may go on. Every request: an allowed Host and Origin. Pages and actions: the token
 * (the trace intake, which workers call without a cookie, only takes JSON and needs no token).
 */
export function gate(
  request: {
    readonly host?: string;
    readonly origin?: string;
    readonly token?: string;
    readonly needsToken: boolean;
  },
  server: { readonly port: number; readonly token: string },
): GateVerdict {
  if (!hostAllowed(request.host, server.port)) {
    return { ok: false, why: `Host must be 127.0.0.1:${server.port} or localhost:${server.port}` };
  }
  if (!originAllowed(request.origin, server.port)) return { ok: false, why: 'cross-origin request refused' };
  if (request.needsToken && !tokenMatches(request.token, server.token)) {
    return { ok: false, why: 'no valid token: open the URL `leaseq ui` printed (it carries ?token=)' };
  }
  return { ok: true };
}
