import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

describe('docs say what the package does', () => {
  it('every "Node.js N or later" names the minimum of package.json engines', () => {
    // Arrange
    const engines = JSON.parse(read('package.json')).engines.node as string;
    const minimum = /^>=(\d+)$/.exec(engines)?.[1];
    expect(minimum, `engines.node ${engines} is not >=N`).toBeDefined();

    // Act: every statement of a minimum Node version, in any of the docs.
    const claims = DOCS.flatMap((file) =>
      [...read(file).matchAll(/Node(?:\.js)?\s+(\d+)(?:\.\d+)*\s+or\s+(?:later|newer)/g)].map((m) => ({
        file,
        major: m[1],
      })),
    );

    // Assert: the install section of docs/jobs.md states it, and nothing states another.
    expect(claims.some((c) => c.file === 'docs/jobs.md')).toBe(true);
    expect(claims.filter((c) => c.major !== minimum)).toEqual([]);
  });

  it('docs/jobs.md does not say metrics stay in memory (the Lambda worker writes EMF: emf-metrics.test.ts)', () => {
    expect(read('docs/jobs.md')).not.toMatch(/not sent to CloudWatch/);
    expect(read('docs/jobs.md')).toMatch(/Embedded Metric Format/);
  });
});
