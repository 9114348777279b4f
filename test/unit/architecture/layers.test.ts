import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// scripts/check-layers.mjs (`npm run check:layers`): no import circle and no upward import in the source.
// It runs as CI runs it, in a child process: once on the repository, and on small synthetic trees that
// show it finds what it must (so a pass on the repository is not a checker that finds nothing).

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const SCRIPT = join(REPO, 'scripts', 'check-layers.mjs');

interface Violation {
  readonly rule: string;
  readonly from: string;
  readonly to: string;
  readonly message: string;
}

interface Report {
  readonly files: number;
  readonly imports: number;
  readonly layers: number;
  readonly violations: Violation[];
}

function run(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8' });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function check(root: string): Report & { status: number | null } {
  const { status, stdout, stderr } = run(['--root', root, '--json']);
  if (!stdout.trim()) throw new Error(`check-layers printed nothing (exit ${status}): ${stderr}`);
  return { status, ...(JSON.parse(stdout) as Report) };
}

const edge = ({ rule, from, to }: Violation) => `${rule}: ${from} -> ${to}`;

const temp = mkdtempSync(join(tmpdir(), 'leaseq-layers-'));
let trees = 0;

/** Writes a tree of files (repository-relative path -> source text) to a fresh directory. */
function tree(files: Record<string, string>): string {
  trees += 1;
  const root = join(temp, `tree-${trees}`);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

// A tree that keeps every rule, with each kind of specifier the checker reads.
const CLEAN: Record<string, string> = {
  'shared/errors.ts': 'export class LeaseqError extends Error {}\n',
  'shared/resources.ts': "import { z } from 'zod';\nexport const NAMES = z.string();\n",
  'shared/core/contract/envelope.ts': [
    "import type { LeaseqError } from '../../errors.ts';",
    "import { NAMES } from '../../resources.ts';",
    'export type Envelope = { error?: LeaseqError; name: typeof NAMES };',
    '',
  ].join('\n'),
  'shared/core/pipeline/processor.ts': [
    'import {',
    '  type Envelope,',
    "} from '../contract/envelope.ts';",
    "export * from '../contract/envelope.ts';",
    'export const load = () => import("../../errors.ts");',
    '// import { run } from "../../../cli/main.ts";  (a comment, not an import)',
    'const text = "import x from \'../../../cli/main.ts\'";',
    "const pattern = /from '..\\/x'/g;",
    // A template literal with substitutions (spelled in pieces: a `${` in a string is a lint warning).
    `export const f = (e: Envelope) => \`${'$'}{text} ${'$'}{pattern.source} ${'$'}{String(e)}\`;`,
    '',
  ].join('\n'),
  'shared/index.ts': "export { load } from './core/pipeline/processor.ts';\n",
  'infra/stack.ts': "import { LeaseqError } from '../shared/errors.ts';\nexport const stack = LeaseqError;\n",
  'shared/local/provision.ts': "import { stack } from '../../infra/stack.ts';\nexport const p = stack;\n",
  'cli/main.ts': [
    "import { load } from '../shared/index.ts';",
    "import { p } from '../shared/local/provision.ts';",
    "import { readFileSync } from 'node:fs';",
    'export const main = [load, p, readFileSync];',
    '',
  ].join('\n'),
  'bin/leaseq.mjs': "await import('../cli/main.ts');\n",
  'test/unit/anything.test.ts': "import { main } from '../../cli/main.ts';\nexport { main };\n",
};

afterAll(() => rmSync(temp, { recursive: true, force: true }));

describe('Script: check-layers on the repository', () => {
  it('finds no import circle and no upward import in the source', () => {
    const report = check(REPO);
    expect(report.violations.map((v) => `${edge(v)}  ${v.message}`)).toEqual([]);
    expect(report.status).toBe(0);
    // It did read the source: every source folder, hundreds of relative imports.
    expect(report.files).toBeGreaterThan(100);
    expect(report.imports).toBeGreaterThan(300);
  });
});

describe('Script: check-layers on synthetic trees', () => {
  it('passes a clean tree, counting every kind of relative import and nothing else', () => {
    const report = check(tree(CLEAN));
    expect(report.violations).toEqual([]);
    expect(report.status).toBe(0);
    // test/ is not read; of the imports, only relative ones to code count (two in processor.ts are in
    // a comment and a string).
    expect(report.files).toBe(9);
    expect(report.imports).toBe(11);
  });

  it('prints a one-line summary and exits 0 on a clean tree', () => {
    const { status, stdout } = run(['--root', tree(CLEAN)]);
    expect(status).toBe(0);
    expect(stdout.trim().split('\n')).toHaveLength(1);
    expect(stdout).toMatch(/^check-layers: 9 files, 11 imports, 19 layers: no circle, no upward import/);
  });

  it('finds a circle of type-only imports', () => {
    const root = tree({
      ...CLEAN,
      'shared/core/contract/a.ts': "import type { B } from './b.ts';\nexport type A = { b?: B };\n",
      'shared/core/contract/b.ts': "import type { A } from './a.ts';\nexport type B = { a?: A };\n",
    });
    const report = check(root);
    expect(report.status).toBe(1);
    expect(report.violations.map(edge)).toEqual([
      'circle: shared/core/contract/a.ts -> shared/core/contract/b.ts',
      'circle: shared/core/contract/b.ts -> shared/core/contract/a.ts',
    ]);
    expect(report.violations[0]?.message).toBe(
      'shared/core/contract/a.ts -> shared/core/contract/b.ts -> shared/core/contract/a.ts',
    );
  });

  it('finds a longer circle through a re-export and a dynamic import, within one layer', () => {
    const root = tree({
      ...CLEAN,
      'shared/ops/a.ts': "export * from './b.ts';\n",
      'shared/ops/b.ts': "export const c = () => import('./c.ts');\n",
      'shared/ops/c.ts': "import './a.ts';\n",
    });
    const report = check(root);
    expect(report.violations.map(edge)).toEqual([
      'circle: shared/ops/a.ts -> shared/ops/b.ts',
      'circle: shared/ops/b.ts -> shared/ops/c.ts',
      'circle: shared/ops/c.ts -> shared/ops/a.ts',
    ]);
    expect(report.violations[2]?.message).toBe(
      'shared/ops/c.ts -> shared/ops/a.ts -> shared/ops/b.ts -> shared/ops/c.ts',
    );
  });

  it('finds upward imports, the deepest matching folder giving the layer', () => {
    const root = tree({
      ...CLEAN,
      // errors (0) on the contract (2), by a type-only import
      'shared/errors.ts': "import type { Item } from './core/contract/job-item.ts';\nexport type E = Item;\n",
      'shared/core/contract/job-item.ts': 'export type Item = { id: string };\n',
      // producer (11) on ops (13)
      'shared/producer/job-producer.ts': "import { send } from '../ops/send.ts';\nexport const p = send;\n",
      'shared/ops/send.ts': 'export const send = 1;\n',
      // infra (15) on a program (18)
      'infra/reference.ts': "export { main } from '../cli/main.ts';\n",
    });
    const report = check(root);
    expect(report.status).toBe(1);
    expect(report.violations.map(edge)).toEqual([
      'upward: infra/reference.ts -> cli/main.ts',
      'upward: shared/errors.ts -> shared/core/contract/job-item.ts',
      'upward: shared/producer/job-producer.ts -> shared/ops/send.ts',
    ]);
    expect(report.violations[1]?.message).toBe('layer 0 (errors) imports layer 2 (contract)');
  });

  it('holds the protocol pure: values only from its listed packages, types from any', () => {
    const root = tree({
      ...CLEAN,
      'shared/core/protocol/claim.ts': [
        "import type { UpdateCommandInput } from '@aws-sdk/lib-dynamodb';",
        "import { unmarshall } from '@aws-sdk/util-dynamodb';",
        "import { DynamoDBClient } from '@aws-sdk/client-dynamodb';",
        "export type { ScanCommandInput } from '@aws-sdk/lib-dynamodb';",
        "export const read = () => import('node:fs');",
        'export const c = [unmarshall, DynamoDBClient] as unknown as UpdateCommandInput;',
        '',
      ].join('\n'),
    });
    const report = check(root);
    expect(report.status).toBe(1);
    expect(report.violations.map(edge)).toEqual([
      'impure: shared/core/protocol/claim.ts -> @aws-sdk/client-dynamodb',
      'impure: shared/core/protocol/claim.ts -> node:fs',
    ]);
    expect(report.violations[0]?.message).toBe(
      'layer 7 (protocol) is pure: values only from @aws-sdk/util-dynamodb (types from any package)',
    );
  });

  it('lets only an index.ts or a program import an entry point', () => {
    const root = tree({
      ...CLEAN,
      'shared/ops/status.ts': "import { load } from '../index.ts';\nexport const s = load;\n",
      'shared/testing/index.ts': "export * from '../index.ts';\n",
      'functions/worker.ts': "export * from '../shared/testing/index.ts';\n",
    });
    const report = check(root);
    expect(report.violations.map(edge)).toEqual(['entry point: shared/ops/status.ts -> shared/index.ts']);
  });

  it('reports a file without a layer, an import that resolves to nothing and one out of the source', () => {
    const root = tree({
      ...CLEAN,
      'shared/new-thing.ts': "import { gone } from './core/gone.ts';\nexport const g = gone;\n",
      'cli/fixture.ts': "import { main } from '../test/unit/anything.test.ts';\nexport const m = main;\n",
    });
    const report = check(root);
    expect(report.violations.map(edge)).toEqual([
      'outside: cli/fixture.ts -> test/unit/anything.test.ts',
      'unranked: shared/new-thing.ts -> ',
      'unresolved: shared/new-thing.ts -> ./core/gone.ts',
    ]);
  });

  it('prints one violation a line, importer -> imported and the rule, and exits 1', () => {
    const root = tree({
      ...CLEAN,
      'shared/errors.ts':
        "import type { Envelope } from './core/contract/envelope.ts';\nexport type E = Envelope;\n",
    });
    const { status, stdout } = run(['--root', root]);
    expect(status).toBe(1);
    // errors -> envelope is upward, and closes a circle with envelope's import of errors.
    expect(stdout.trim().split('\n')).toEqual([
      'shared/errors.ts -> shared/core/contract/envelope.ts  [upward] layer 0 (errors) imports layer 2 (contract)',
      'shared/core/contract/envelope.ts -> shared/errors.ts  [circle] shared/core/contract/envelope.ts -> shared/errors.ts -> shared/core/contract/envelope.ts',
      'shared/errors.ts -> shared/core/contract/envelope.ts  [circle] shared/errors.ts -> shared/core/contract/envelope.ts -> shared/errors.ts',
    ]);
  });
});
