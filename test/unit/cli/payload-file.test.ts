import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readPayloadFile } from '../../../cli/commands/redrive-input.ts';

let n = 0;
function file(content: string | Buffer): string {
  const path = join(tmpdir(), `leaseq-payload-${process.pid}-${n++}.json`);
  writeFileSync(path, content);
  return path;
}

describe('Function: readPayloadFile', () => {
  it('reads a file an editor saved with a UTF-8 byte order mark, and surrounding whitespace', () => {
    const path = file(
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('\r\n {"to":"ana"} \r\n')]),
    );

    expect(readPayloadFile(path, 'k')).toEqual({ value: { to: 'ana' } });
  });

  it.each([
    ['a bare word', 'password=hunter2-secret'],
    ['an unquoted value', '{"password": hunter2secret}'],
  ])('refuses a file that is not JSON (%s) without quoting its contents', (_what, text) => {
    const path = file(text);

    expect(() => readPayloadFile(path, 'k')).toThrow(/is not JSON/);
    try {
      readPayloadFile(path, 'k');
    } catch (error) {
      expect((error as Error).message).not.toMatch(/hunter2/);
      expect((error as Error).message).toMatch(/is not JSON \(at (position \d+|an unexpected token)/);
    }
  });
});
