import { describe, expect, it } from 'vitest';
import { safeJson, safeLines, safeText } from '../../../cli/safe-text.ts';
import { C1_AND_BIDI, CLEAR_SCREEN, RETITLE, rawControls } from '../../support/hostile-text.ts';

describe('Function: safeText', () => {
  it('escapes the terminal payloads as visible \\uXXXX text', () => {
    // Act + Assess
    expect(safeText(RETITLE)).toBe('\\u001b]0;pwned\\u0007\\u001b[1A\\u001b[2K');
    expect(safeText(CLEAR_SCREEN)).toBe('\\u001b[2J\\u001b[H ALL JOBS OK');
  });

  it('escapes every C0 control (tab, CR, newline too), DEL, C1, the separators and the bidi controls', () => {
    // Prepare
    const unsafe = [
      ...Array.from({ length: 0x20 }, (_, i) => i),
      0x7f,
      ...Array.from({ length: 0x20 }, (_, i) => 0x80 + i),
      0x2028,
      0x2029,
      0x202a,
      0x202b,
      0x202c,
      0x202d,
      0x202e,
      0x2066,
      0x2067,
      0x2068,
      0x2069,
      // The bidi marks: an RLM before `10 - 5` draws `5 - 10` (ui-browser-probes.test.ts).
      0x200e,
      0x200f,
      0x061c,
    ];
    for (const code of unsafe) {
      // Act
      const out = safeText(`a${String.fromCharCode(code)}b`);
      // Assess
      expect(out).toBe(`a\\u${code.toString(16).padStart(4, '0')}b`);
    }
  });

  it('keeps ordinary text as it is: ASCII, accents, CJK, emoji, other marks', () => {
    // Prepare
    const text = 'Zoë paid 12,50 € to 山田 🎉 — ok (→ √) \u200d\u00a0\u00ff\u2027\u202f\u2065\u206a';
    // Act + Assess
    expect(safeText(text)).toBe(text);
    expect(rawControls(safeText(`${RETITLE}${CLEAR_SCREEN}${C1_AND_BIDI}`), false)).toEqual([]);
  });

  it('leaves a literal backslash sequence alone (it reads like an escape and does nothing)', () => {
    expect(safeText('\\u001b[2J')).toBe('\\u001b[2J');
  });
});

describe('Function: safeLines', () => {
  it('keeps newlines and escapes everything else', () => {
    expect(safeLines(`one\ntwo\r\n${CLEAR_SCREEN}`)).toBe('one\ntwo\\u000d\n\\u001b[2J\\u001b[H ALL JOBS OK');
    expect(rawControls(safeLines(`${RETITLE}\n${C1_AND_BIDI}`))).toEqual([]);
  });
});

describe('Function: safeJson', () => {
  it('escapes C1, DEL, the separators and the bidi controls JSON.stringify leaves raw, and parses back equal', () => {
    // Prepare
    const value = { key: RETITLE, type: CLEAR_SCREEN, note: C1_AND_BIDI, 'k\u202e': ['ok', 'Zoë 山田 🎉'] };
    // Act
    const json = safeJson(value, 2);
    // Assess
    expect(rawControls(json)).toEqual([]);
    expect(json).toContain('\\u009b2J\\u007f \\u202eevil');
    expect(json).toContain('"k\\u202e"');
    expect(json).toContain('Zoë 山田 🎉');
    expect(JSON.parse(json)).toEqual(value);
    expect(rawControls(JSON.stringify(value))).not.toEqual([]);
  });

  it('matches JSON.stringify for plain values, and prints null for undefined', () => {
    const value = { a: [1, 'two', null], b: { c: true } };
    expect(safeJson(value, 2)).toBe(JSON.stringify(value, null, 2));
    expect(safeJson(value)).toBe(JSON.stringify(value));
    expect(safeJson(undefined)).toBe('null');
  });
});
