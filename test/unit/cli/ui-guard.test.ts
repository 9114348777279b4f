import { describe, expect, it } from 'vitest';
import {
  gate,
  hostAllowed,
  newToken,
  originAllowed,
  requestToken,
  TOKEN_COOKIE,
  tokenCookie,
  tokenMatches,
} from '../../../cli/ui/guard.ts';
import { PALETTE } from '../../../cli/ui/html.ts';

const server = { port: 8686, token: 'tok-123' };

describe('leaseq ui gate', () => {
  it('makes a fresh, URL-safe token of 32 random bytes per start', () => {
    const a = newToken();
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(newToken()).not.toBe(a);
  });

  it('matches the token exactly, never an absent, shorter or longer one', () => {
    expect(tokenMatches('tok-123', 'tok-123')).toBe(true);
    for (const given of [undefined, '', 'tok-12', 'tok-1234', 'TOK-123'])
      expect(tokenMatches(given, 'tok-123')).toBe(false);
  });

  it('takes Host 127.0.0.1:port or localhost:port only (DNS rebinding names another host)', () => {
    expect(hostAllowed('127.0.0.1:8686', 8686)).toBe(true);
    expect(hostAllowed('LOCALHOST:8686', 8686)).toBe(true);
    for (const host of [
      undefined,
      '',
      'evil.example:8686',
      '127.0.0.1',
      '127.0.0.1:8687',
      'localhost',
      '[::1]:8686',
      '10.0.0.5:8686',
    ]) {
      expect(hostAllowed(host, 8686)).toBe(false);
    }
  });

  it('takes no Origin or its own, refuses null and other sites', () => {
    expect(originAllowed(undefined, 8686)).toBe(true);
    expect(originAllowed('http://127.0.0.1:8686', 8686)).toBe(true);
    expect(originAllowed('http://localhost:8686', 8686)).toBe(true);
    for (const o of ['null', 'http://evil.example', 'http://127.0.0.1:9999', 'https://127.0.0.1:8686']) {
      expect(originAllowed(o, 8686)).toBe(false);
    }
  });

  it('reads the token from ?token= first, else from its cookie among others', () => {
    expect(requestToken('q', `${TOKEN_COOKIE}=c`)).toBe('q');
    expect(requestToken(undefined, `a=1; ${TOKEN_COOKIE}=c-d=; b=2`)).toBe('c-d=');
    expect(requestToken(undefined, 'a=1')).toBeUndefined();
    expect(tokenCookie('t')).toBe(`${TOKEN_COOKIE}=t; HttpOnly; SameSite=Strict; Path=/`);
  });

  it('refuses a bad host before anything, then a foreign origin, then a missing token', () => {
    const ok = { host: '127.0.0.1:8686', token: 'tok-123', needsToken: true };
    expect(gate(ok, server)).toEqual({ ok: true });
    expect(gate({ ...ok, host: 'evil.example:8686' }, server)).toMatchObject({
      ok: false,
      why: expect.stringMatching(/^Host must be/),
    });
    expect(gate({ ...ok, origin: 'http://evil.example' }, server)).toMatchObject({
      ok: false,
      why: 'cross-origin request refused',
    });
    expect(gate({ ...ok, token: 'wrong' }, server)).toMatchObject({
      ok: false,
      why: expect.stringMatching(/no valid token/),
    });
    // The trace intake needs no token (workers carry no cookie), but still the host check.
    expect(gate({ host: '127.0.0.1:8686', needsToken: false }, server)).toEqual({ ok: true });
    expect(gate({ host: 'evil.example:8686', needsToken: false }, server).ok).toBe(false);
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
