import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cdkCaBundle } from '../../../shared/local/deploy.ts';

const dir = mkdtempSync(join(tmpdir(), 'leaseq-ca-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function pem(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

describe('the CA bundle handed to the CDK CLI', () => {
  it('is one file per run: a second deploy in the same project does not replace the first one bundle', () => {
    // Found by the fresh-clone CI: the IAM test's deploy (its emulator's own certificate) met
    // "self-signed certificate" because a deploy of another test file, in the same project, wrote the
    // shared bundle file with only the machine's CA between the write and the CLI reading it.
    const system = pem('system.pem', 'SYSTEM\n');
    const emulator = pem('emulator.pem', 'EMULATOR\n');
    const first = cdkCaBundle({ AWS_CA_BUNDLE: system, NODE_EXTRA_CA_CERTS: emulator }, dir);
    const second = cdkCaBundle({ AWS_CA_BUNDLE: system, NODE_EXTRA_CA_CERTS: system }, dir);
    expect(first?.file).toBeDefined();
    expect(readFileSync(first?.file as string, 'utf8')).toContain('EMULATOR');
    expect(second?.file).not.toBe(first?.file);
    first?.remove();
    second?.remove();
    expect(existsSync(first?.file as string)).toBe(false);
  });

  it('is the AWS_CA_BUNDLE itself when no extra certificates are set, and nothing when neither is', () => {
    const system = pem('only.pem', 'SYSTEM\n');
    expect(cdkCaBundle({ AWS_CA_BUNDLE: system }, dir)?.file).toBe(system);
    expect(cdkCaBundle({}, dir)).toBeUndefined();
  });
});
