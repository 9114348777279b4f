import { describe, expect, it } from 'vitest';
import {
  capText,
  describe as describeError,
  ERROR_CLASS_MAX,
  ERROR_TEXT_MAX,
  errorClass,
  errorText,
  REDACT_ERROR_THREW,
  truncationMarker,
  validText,
} from '../../shared/error-text.ts';
import { TransientJobError } from '../../shared/errors.ts';

// error-text.ts's one function for error text that leaves the process (docs/security.md): the deployment's
// redaction, the cap with its marker, and text valid for SQS message attributes and DynamoDB.

describe('errorText', () => {
  it('is `Name: message` for an Error and the string of anything else, as before', () => {
    expect(errorText(new TransientJobError('downstream refused'))).toBe(
      'TransientJobError: downstream refused',
    );
    expect(errorText('boom')).toBe('boom');
    expect(errorText(42)).toBe('42');
    expect(describeError(new Error('x'))).toBe('Error: x');
  });

  it('caps at ERROR_TEXT_MAX with a marker naming the original length', () => {
    const text = errorText(new Error('y'.repeat(76_000)));
    expect(text).toHaveLength(ERROR_TEXT_MAX);
    expect(text.endsWith(truncationMarker(76_007))).toBe(true);
    expect(text.startsWith('Error: yyy')).toBe(true);
    expect(errorText(new Error('z'.repeat(ERROR_TEXT_MAX - 7)))).toHaveLength(ERROR_TEXT_MAX);
    expect(errorText(new Error('z'.repeat(ERROR_TEXT_MAX - 7)))).not.toContain('truncated');
    expect(describeError(new Error('y'.repeat(5000)))).toHaveLength(ERROR_TEXT_MAX);
  });

  it('redacts before capping, so data past the cap never counts and data across it is masked', () => {
    const card = '4111111111111111';
    const message = `${'a'.repeat(ERROR_TEXT_MAX - 40)}${card}${'b'.repeat(2000)}`;
    const text = errorText(new Error(message), (t) => t.replace(/\d/g, '#'));
    // The number straddles the cut: the part kept was masked with the rest (a hook run after the cut
    // would see only "411" and miss it).
    expect(text).not.toContain('411');
    expect(text).toMatch(/a#{3}… \[truncated: \d+ characters\]$/);
    expect(text).toHaveLength(ERROR_TEXT_MAX);
  });

  it('passes the thrown value to the hook', () => {
    const error = new Error('secret');
    let seen: unknown;
    expect(
      errorText(error, (text, e) => {
        seen = e;
        return text.replace('secret', '[redacted]');
      }),
    ).toBe('Error: [redacted]');
    expect(seen).toBe(error);
  });

  it('withholds the text when the hook throws or returns no string', () => {
    const throwing = () => {
      throw new Error('hook bug');
    };
    expect(errorText(new Error('secret'), throwing)).toBe(REDACT_ERROR_THREW);
    expect(errorText(new Error('secret'), () => undefined as unknown as string)).toBe(REDACT_ERROR_THREW);
  });

  it('survives a thrown value that cannot be printed', () => {
    const bad = {
      toString() {
        throw new Error('no');
      },
    };
    expect(errorText(bad)).toBe('[object that cannot be printed]');
  });

  it('replaces what SQS attributes refuse (lone surrogates, C0 but tab/LF/CR, U+FFFE/U+FFFF) and keeps the rest', () => {
    expect(validText('a\uD800b')).toBe('a\uFFFDb');
    expect(validText('a\uDC00b')).toBe('a\uFFFDb');
    expect(validText('\uDC00\uD800')).toBe('\uFFFD\uFFFD');
    expect(validText('a\u0000b\u0007c\u001Fd\uFFFEe\uFFFF')).toBe('a\uFFFDb\uFFFDc\uFFFDd\uFFFDe\uFFFD');
    expect(validText('tab\tlf\ncr\r é € 😀 \uE000\uFFFD')).toBe('tab\tlf\ncr\r é € 😀 \uE000\uFFFD');
    expect(errorText(new Error('x\uD83D'))).toBe('Error: x\uFFFD');
  });

  it('never splits a surrogate pair at the cut', () => {
    const marker = truncationMarker(3000).length;
    // The pair straddles the cut: its high half would be the last character kept.
    const text = `${'a'.repeat(ERROR_TEXT_MAX - marker - 1)}😀${'b'.repeat(3000 - (ERROR_TEXT_MAX - marker + 1))}`;
    expect(text).toHaveLength(3000);
    const cut = capText(text);
    expect(cut.length).toBeLessThanOrEqual(ERROR_TEXT_MAX);
    expect(validText(cut)).toBe(cut);
    expect(cut).not.toContain('😀');
  });
});

describe('errorClass', () => {
  it('is the name, capped and valid', () => {
    expect(errorClass(new TransientJobError('x'))).toBe('TransientJobError');
    expect(errorClass('x')).toBe('string');
    const odd = new Error('x');
    odd.name = `N\uD800${'n'.repeat(5000)}`;
    const name = errorClass(odd);
    expect(name).toHaveLength(ERROR_CLASS_MAX);
    expect(validText(name)).toBe(name);
  });
});
