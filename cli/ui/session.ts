/**
 * The inspector's sessions: the printed link's token is a ticket a browser trades, once, for a session
 * cookie of the inspector's own host name; the trace intake takes spans only with the trace token.
 *
 * Why a ticket and not the cookie itself: a browser keeps every URL it opened in its history, redirects
 * too (Chromium's History database holds `/?token=...` after the 303 that dropped it from the address
 * bar), so the link must be worth nothing once used. Each trade makes a new ticket, announced on the
 * terminal, for another browser.
 */
import type { Context, MiddlewareHandler } from 'hono';
import {
  gate,
  newToken,
  ownLocation,
  sessionCookies,
  TRACE_TOKEN_HEADER,
  tokenCookie,
  tokenMatches,
} from './guard.ts';

/**
 * How long a session lasts unused: an open overview polls every 2 s and keeps its session, while a
 * cookie in a browser closed (or restored days later) or copied elsewhere stops working. The terminal
 * always holds the next link.
 */
export const SESSION_IDLE_MS = 12 * 3_600_000;

/** The tickets and sessions of one inspector start. */
export class UiSessions {
  #ticket: string;
  /** Each session's last use (epoch ms). */
  readonly #sessions = new Map<string, number>();
  readonly #now: () => number;

  /** @param ticket the token of the first printed link */
  constructor(ticket: string, now: () => number = Date.now) {
    this.#ticket = ticket;
    this.#now = now;
  }

  /** The token of the link not used yet. */
  get ticket(): string {
    return this.#ticket;
  }

  /**
   * Trades the live ticket for a new session (returned) and makes the next ticket; undefined when
   * `given` is not the live ticket (a used link, a guess).
   */
  exchange(given: string | undefined): string | undefined {
    if (!tokenMatches(given, this.#ticket)) return undefined;
    this.#ticket = newToken();
    const session = newToken();
    this.#sessions.set(session, this.#now());
    return session;
  }

  /** Whether any session cookie in the header is one of this start's live sessions (its use is noted). */
  valid(cookieHeader: string | undefined): boolean {
    const given = sessionCookies(cookieHeader);
    const now = this.#now();
    let ok = false;
    // Every value compared, in constant time each: no early exit that tells which one matched.
    for (const [session, used] of this.#sessions) {
      if (now - used > SESSION_IDLE_MS) {
        this.#sessions.delete(session);
        continue;
      }
      let match = false;
      for (const value of given) match = tokenMatches(value, session) || match;
      if (match) this.#sessions.set(session, now);
      ok = match || ok;
    }
    return ok;
  }
}

export interface SessionGateOptions {
  readonly sessions: UiSessions;
  /** The inspector's host name (`leaseq-<random>.localhost`). */
  readonly host: string;
  readonly port: () => number;
  /** The token workers send in {@link TRACE_TOKEN_HEADER} with their spans. */
  readonly traceToken: string;
  /** A refusal page with the reason; no target line: anyone reads it (a DNS-rebinding page), it names the account. */
  readonly refuse: (c: Context, why: string, status: 401 | 403) => Response;
  /** Called with the next link after each trade (the terminal prints it). */
  readonly onNewLink?: (url: string) => void;
}

/**
 * The gate of every request: Host and Origin (guard.ts), then the trace token for `/v1/traces`, else a
 * session. A GET with `?token=` trades the link for a session and is sent, with a 303, to the same path
 * of this server without the token.
 */
export function sessionGate(options: SessionGateOptions): MiddlewareHandler {
  const { sessions, host } = options;
  return async (c, next) => {
    const port = options.port();
    const origin = `http://${host}:${port}`;
    const traces = c.req.path === '/v1/traces';
    const verdict = gate(
      { host: c.req.header('host'), origin: c.req.header('origin'), traces },
      { host, port },
    );
    if (!verdict.ok) return options.refuse(c, verdict.why, 403);
    if (traces) {
      if (!tokenMatches(c.req.header(TRACE_TOKEN_HEADER), options.traceToken)) {
        return options.refuse(
          c,
          `no valid ${TRACE_TOKEN_HEADER}: set OTEL_EXPORTER_OTLP_HEADERS as leaseq ui printed it`,
          401,
        );
      }
      return next();
    }
    const cookie = c.req.header('cookie');
    const ticket = c.req.query('token');
    if (c.req.method === 'GET' && ticket !== undefined) {
      const session = sessions.exchange(ticket);
      if (!session && !sessions.valid(cookie)) {
        return options.refuse(
          c,
          "this link was used already or is not this start's: open the newest link leaseq ui printed",
          403,
        );
      }
      if (session) {
        c.header('Set-Cookie', tokenCookie(session));
        options.onNewLink?.(`${origin}/?token=${sessions.ticket}`);
      }
      const url = new URL(c.req.url);
      url.searchParams.delete('token');
      return c.redirect(ownLocation(origin, url.pathname, url.search), 303);
    }
    if (!sessions.valid(cookie)) {
      return options.refuse(
        c,
        'no valid session: open the link `leaseq ui` printed (it carries ?token=)',
        403,
      );
    }
    return next();
  };
}
