/**
 * The inspector's gate: the host name of its own, the Host and Origin a request may carry, the cookie
 * and the trace intake's header. Pure, so the rules are unit-tested apart from the server
 * (test/unit/cli/ui-guard.test.ts); the session store that uses them is session.ts.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';

/** The cookie that holds a browser's session after the link's token was traded (HttpOnly, SameSite=Strict). */
export const TOKEN_COOKIE = 'leaseq_ui_token';

/** The header leaseq's workers send their spans with (`OTEL_EXPORTER_OTLP_HEADERS`). */
export const TRACE_TOKEN_HEADER = 'x-leaseq-trace-token';

/**
 * How every inspector's host name ends; browsers resolve `*.localhost` to the loopback. Directly under
 * `localhost`, which browsers take for a top-level domain, so each name is a site of its own: under a
 * shared parent (`x.leaseq.localhost`) any page on a sibling name was the same site, its requests carried
 * the SameSite=Strict session and its `Domain=leaseq.localhost` cookies reached the inspector (a few of
 * 4 KB made every request too large, 431), without knowing the inspector's name.
 */
export const UI_HOST_SUFFIX = '.localhost';

/** A fresh token: 32 random bytes, base64url (URL- and cookie-safe). */
export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * A fresh host name for one start: `leaseq-<24 hex digits>.localhost`. Cookies are not scoped by port,
 * only by host: a cookie of this name reaches no server on 127.0.0.1 or localhost, and one on another
 * port under this same name only if it knows these 96 random bits.
 */
export function newUiHost(): string {
  return `leaseq-${randomBytes(12).toString('hex')}${UI_HOST_SUFFIX}`;
}

/** Constant-time comparison; a missing or differently long value never matches. */
export function tokenMatches(given: string | undefined, token: string): boolean {
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The Host a page or an action may name: the inspector's own host name with its port, nothing else.
 * `127.0.0.1` and `localhost` are refused too: a browser holds the cookie for the host name, and a
 * DNS-rebinding page (evil.example resolving to 127.0.0.1) names its own host.
 */
export function hostAllowed(host: string | undefined, uiHost: string, port: number): boolean {
  return host !== undefined && host.toLowerCase() === `${uiHost}:${port}`;
}

/**
 * The Host the trace intake may name: its own or `127.0.0.1:<port>`, the endpoint printed for workers
 * (their resolver may not know `*.localhost`). The trace token, not the host, is what lets spans in.
 */
export function traceHostAllowed(host: string | undefined, uiHost: string, port: number): boolean {
  return hostAllowed(host, uiHost, port) || host === `127.0.0.1:${port}`;
}

/**
 * The Origin a request may carry: none (a worker's exporter, curl, a top-level navigation by GET) or
 * this server's own. `null` (a sandboxed frame, a file: page) and other sites are refused.
 */
export function originAllowed(origin: string | undefined, uiHost: string, port: number): boolean {
  return origin === undefined || origin === `http://${uiHost}:${port}`;
}

/**
 * Every value of the session cookie in a Cookie header. All of them: a browser that takes `localhost`
 * for an ordinary name would let a page on a sibling (`x.localhost`) set a cookie of the same name for
 * `localhost`, which it sends beside this one, first when its path is longer.
 */
export function sessionCookies(cookieHeader: string | undefined): string[] {
  const values: string[] = [];
  for (const part of (cookieHeader ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === TOKEN_COOKIE) values.push(value.join('='));
  }
  return values;
}

/** The Set-Cookie value that keeps a session for this host name only (no Domain: host-only). */
export function tokenCookie(session: string): string {
  return `${TOKEN_COOKIE}=${session}; HttpOnly; SameSite=Strict; Path=/`;
}

/**
 * Where the token exchange sends the browser: the same path and query on this server, never another
 * site. The request's path can start with `//` or `/\` (a browser reads both as another host when they
 * lead a Location); leading slashes and backslashes become one `/`, and the answer is absolute on
 * `origin`, so it cannot name another host whatever the path holds.
 */
export function ownLocation(origin: string, pathname: string, search: string): string {
  const path = `/${pathname.replace(/^[/\\]+/, '')}`;
  const location = new URL(`${origin}${path}${search}`);
  return location.origin === origin ? location.href : `${origin}/`;
}

export type GateVerdict = { readonly ok: true } | { readonly ok: false; readonly why: string };

/**
 * Whether a request's Host and Origin let it go on: pages and actions on the inspector's own host name
 * only, the trace intake also on `127.0.0.1:<port>`. The session and the trace token are checked next
 * (session.ts).
 */
export function gate(
  request: { readonly host?: string; readonly origin?: string; readonly traces: boolean },
  server: { readonly host: string; readonly port: number },
): GateVerdict {
  const hostOk = request.traces
    ? traceHostAllowed(request.host, server.host, server.port)
    : hostAllowed(request.host, server.host, server.port);
  // The answer never names the host: whoever knows it could serve a page under it on another port, and
  // the browser would send that page the session cookie.
  if (!hostOk) return { ok: false, why: 'Host not allowed: open the link leaseq ui printed' };
  if (!originAllowed(request.origin, server.host, server.port))
    return { ok: false, why: 'cross-origin request refused' };
  return { ok: true };
}
