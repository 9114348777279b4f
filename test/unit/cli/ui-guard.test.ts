import { describe, expect, it } from 'vitest';
import {
  gate,
  hostAllowed,
  newToken,
  newUiHost,
  originAllowed,
  ownLocation,
  sessionCookies,
  TOKEN_COOKIE,
  tokenCookie,
  tokenMatches,
  traceHostAllowed,
} from '../../../cli/ui/guard.ts';
import { PALETTE } from '../../../cli/ui/layout.ts';
import { UiSessions } from '../../../cli/ui/session.ts';

const HOST = 'leaseq-0123456789abcdef01234567.localhost';
const server = { host: HOST, port: 8686 };

describe('leaseq ui gate', () => {
  it('makes a fresh, URL-safe token of 32 random bytes per start', () => {
    const a = newToken();
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(newToken()).not.toBe(a);
  });

  it('makes a fresh host name of 96 random bits directly under .localhost per start', () => {
    const a = newUiHost();
    expect(a).toMatch(/^leaseq-[0-9a-f]{24}\.localhost$/);
    expect(newUiHost()).not.toBe(a);
  });

  it('matches the token exactly, never an absent, shorter or longer one', () => {
    expect(tokenMatches('tok-123', 'tok-123')).toBe(true);
    for (const given of [undefined, '', 'tok-12', 'tok-1234', 'TOK-123'])
      expect(tokenMatches(given, 'tok-123')).toBe(false);
  });

  it('takes Host <its name>:port only for pages (DNS rebinding names another host; the loopback names hold no session)', () => {
    expect(hostAllowed(`${HOST}:8686`, HOST, 8686)).toBe(true);
    expect(hostAllowed(`${HOST.toUpperCase()}:8686`, HOST, 8686)).toBe(true);
    for (const host of [
      undefined,
      '',
      'evil.example:8686',
      '127.0.0.1:8686',
      'localhost:8686',
      HOST,
      `${HOST}:8687`,
      `x${HOST}:8686`,
      `other.leaseq.localhost:8686`,
      '[::1]:8686',
    ]) {
      expect(hostAllowed(host, HOST, 8686), String(host)).toBe(false);
    }
    // The trace intake also on the printed endpoint 127.0.0.1:<port>, nothing else.
    expect(traceHostAllowed('127.0.0.1:8686', HOST, 8686)).toBe(true);
    expect(traceHostAllowed(`${HOST}:8686`, HOST, 8686)).toBe(true);
    for (const host of ['localhost:8686', '127.0.0.1:8687', 'evil.example:8686'])
      expect(traceHostAllowed(host, HOST, 8686), host).toBe(false);
  });

  it('takes no Origin or its own, refuses null, the loopback names and other sites', () => {
    expect(originAllowed(undefined, HOST, 8686)).toBe(true);
    expect(originAllowed(`http://${HOST}:8686`, HOST, 8686)).toBe(true);
    for (const o of [
      'null',
      'http://evil.example',
      'http://127.0.0.1:8686',
      'http://localhost:8686',
      `https://${HOST}:8686`,
    ]) {
      expect(originAllowed(o, HOST, 8686), o).toBe(false);
    }
  });

  it('reads every value of its cookie among others; sets a host-only HttpOnly SameSite=Strict one', () => {
    expect(sessionCookies(`a=1; ${TOKEN_COOKIE}=c-d=; b=2; ${TOKEN_COOKIE}=e`)).toEqual(['c-d=', 'e']);
    expect(sessionCookies('a=1')).toEqual([]);
    expect(sessionCookies(undefined)).toEqual([]);
    expect(tokenCookie('t')).toBe(`${TOKEN_COOKIE}=t; HttpOnly; SameSite=Strict; Path=/`);
  });

  it('sends the exchange to its own origin only, the path and query kept', () => {
    const origin = `http://${HOST}:8686`;
    expect(ownLocation(origin, '/jobs', '?status=DEAD')).toBe(`${origin}/jobs?status=DEAD`);
    for (const path of [
      '//evil.example/',
      '/\\evil.example',
      '/\\/evil.example',
      '///evil.example',
      '//evil.example@x/',
    ]) {
      const to = new URL(ownLocation(origin, path, ''));
      expect(to.origin, path).toBe(origin);
    }
  });

  it('refuses a bad host before anything, then a foreign origin', () => {
    const ok = { host: `${HOST}:8686`, traces: false };
    expect(gate(ok, server)).toEqual({ ok: true });
    expect(gate({ ...ok, host: '127.0.0.1:8686' }, server)).toEqual({
      ok: false,
      why: 'Host not allowed: open the link leaseq ui printed',
    });
    expect(gate({ ...ok, origin: 'http://evil.example' }, server)).toMatchObject({
      ok: false,
      why: 'cross-origin request refused',
    });
    expect(gate({ host: '127.0.0.1:8686', traces: true }, server)).toEqual({ ok: true });
    expect(gate({ host: 'evil.example:8686', traces: true }, server).ok).toBe(false);
  });
});

describe('Class: UiSessions', () => {
  it('trades the live ticket once for a new session, then takes the next ticket only', () => {
    const sessions = new UiSessions('ticket-1');
    expect(sessions.exchange('wrong')).toBeUndefined();
    const session = sessions.exchange('ticket-1');
    expect(session).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(sessions.exchange('ticket-1')).toBeUndefined();
    expect(sessions.ticket).not.toBe('ticket-1');
    expect(sessions.valid(`${TOKEN_COOKIE}=${session}`)).toBe(true);
    // A cookie of the same name tossed in beside it (a sibling host name can set one) does not hide it.
    expect(sessions.valid(`${TOKEN_COOKIE}=tossed; ${TOKEN_COOKIE}=${session}`)).toBe(true);
    expect(sessions.valid(`${TOKEN_COOKIE}=ticket-1`)).toBe(false);
    expect(sessions.valid(undefined)).toBe(false);
  });

  it('ends a session left unused for 12 hours (a browser closed or restored later, a copied cookie); use keeps it', () => {
    let now = 1_000_000;
    const sessions = new UiSessions('ticket-1', () => now);
    const used = `${TOKEN_COOKIE}=${sessions.exchange('ticket-1')}`;
    const idle = `${TOKEN_COOKIE}=${sessions.exchange(sessions.ticket)}`;
    for (let hour = 1; hour <= 13; hour++) {
      now += 3_600_000;
      expect(sessions.valid(used), `hour ${hour}`).toBe(true);
    }
    expect(sessions.valid(idle)).toBe(false);
    now += 12 * 3_600_000 + 1;
    expect(sessions.valid(used)).toBe(false);
    // A new link still makes a session.
    expect(sessions.valid(`${TOKEN_COOKIE}=${sessions.exchange(sessions.ticket)}`)).toBe(true);
  });
});

/** WCAG 2 relative luminance of #rrggbb. */
function luminance(hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const c = Number.parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

function contrast(fg: string, bg: string): number {
  const [a, b] = [luminance(fg), luminance(bg)].sort((x, y) => y - x) as [number, number];
  return (a + 0.05) / (b + 0.05);
}

describe('leaseq ui stylesheet', () => {
  it('computes contrast as WCAG does (black on white 21:1, #777 on white below AA)', () => {
    expect(contrast('#000000', '#ffffff')).toBeCloseTo(21, 5);
    expect(contrast('#777777', '#ffffff')).toBeLessThan(4.5);
  });

  it.each(Object.entries(PALETTE))('%s text meets WCAG AA (4.5:1) on its background', (_name, { fg, bg }) => {
    expect(contrast(fg, bg)).toBeGreaterThanOrEqual(4.5);
  });
});
