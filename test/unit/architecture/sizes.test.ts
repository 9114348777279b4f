import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// scripts/check-sizes.mjs (`npm run check:sizes`): no source file past the line limit, the older long
// files held at their size. It runs as CI runs it, in a child process: once on the repository, and on
// synthetic trees that show it finds each kind of violation.

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const SCRIPT = join(REPO, 'scripts', 'check-sizes.mjs');

interface Report {
  readonly files: number;
  readonly limit: number;
  readonly ceilings: Record<string, number>;
  readonly violations: { rule: string; path: string; lines: number; message: string }[];
}

function check(root?: string): Report & { status: number | null } {
  const args = root === undefined ? ['--json'] : ['--root', root, '--json'];
  const result = spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8' });
  if (!result.stdout.trim())
    throw new Error(`check-sizes printed nothing (exit ${result.status}): ${result.stderr}`);
  return { status: result.status, ...(JSON.parse(result.stdout) as Report) };
}

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function tree(files: Record<string, number>, ceilings: Record<string, number> = {}): string {
  const root = mkdtempSync(join(tmpdir(), 'leaseq-sizes-'));
  roots.push(root);
  for (const [path, lines] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), 'export const x = 1;\n'.repeat(lines));
  }
  writeFileSync(join(root, 'size-ceilings.json'), JSON.stringify(ceilings));
  return root;
}

describe('check-sizes', () => {
  it('passes on the repository', () => {
    const report = check();
    expect(report.violations.map((v) => v.message)).toEqual([]);
    expect(report.status).toBe(0);
    expect(report.files).toBeGreaterThan(100);
  });

  it('refuses a new file over the limit and accepts one at it', () => {
    const report = check(tree({ 'shared/long.ts': 401, 'shared/ok.ts': 400 }));
    expect(report.status).toBe(1);
    expect(report.violations.map((v) => [v.rule, v.path, v.lines])).toEqual([
      ['too-long', 'shared/long.ts', 401],
    ]);
  });

  it('holds the processor to 300 lines', () => {
    const report = check(
      tree({ 'shared/core/pipeline/processor.ts': 301, 'shared/core/pipeline/other.ts': 301 }),
    );
    expect(report.violations.map((v) => [v.rule, v.path])).toEqual([
      ['too-long', 'shared/core/pipeline/processor.ts'],
    ]);
  });

  it('holds an older long file at its ceiling and reports a ceiling that is no longer needed', () => {
    const report = check(
      tree(
        { 'cli/grown.ts': 501, 'cli/held.ts': 500, 'cli/split.ts': 200 },
        { 'cli/grown.ts': 500, 'cli/held.ts': 500, 'cli/split.ts': 600, 'cli/gone.ts': 700 },
      ),
    );
    expect(report.status).toBe(1);
    expect(report.violations.map((v) => `${v.rule} ${v.path}`).sort()).toEqual([
      'grown cli/grown.ts',
      'stale-ceiling cli/gone.ts',
      'stale-ceiling cli/split.ts',
    ]);
  });

  it('lists no file of shared/ in CEILINGS: the library is held to the limit with no exception', () => {
    const report = check();
    expect(Object.keys(report.ceilings).filter((path) => path.startsWith('shared/'))).toEqual([]);
  });

  it('refuses a ceiling for a file of shared/', () => {
    const report = check(
      tree({ 'shared/old.ts': 450, 'cli/old.ts': 450 }, { 'shared/old.ts': 450, 'cli/old.ts': 450 }),
    );
    expect(report.status).toBe(1);
    expect(report.violations.map((v) => `${v.rule} ${v.path}`)).toEqual(['library-ceiling shared/old.ts']);
  });
});
