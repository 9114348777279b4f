import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../shared/errors.ts';
import { findJobModule, loadJobModule } from '../../../shared/jobs/job-module.ts';

const dir = mkdtempSync(join(tmpdir(), 'leaseq-jobmodule-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const LEDGER = fileURLToPath(new URL('../../../examples/ledger/jobs.ts', import.meta.url));

describe('Function: findJobModule', () => {
  it('takes the flag, then LEASEQ_JOBS_MODULE, then "leaseq.jobs" of the nearest package.json', () => {
    const project = join(dir, 'project');
    mkdirSync(join(project, 'src', 'deep'), { recursive: true });
    writeFileSync(join(project, 'package.json'), JSON.stringify({ leaseq: { jobs: './src/jobs.ts' } }));
    const cwd = join(project, 'src', 'deep');

    expect(findJobModule('x.ts', cwd, {})).toBe(join(cwd, 'x.ts'));
    expect(findJobModule(undefined, cwd, { LEASEQ_JOBS_MODULE: '/abs/jobs.ts' })).toBe('/abs/jobs.ts');
    expect(findJobModule(undefined, cwd, {})).toBe(join(project, 'src', 'jobs.ts'));
  });

  it('finds none when the nearest package.json names none, and refuses a field that is not a path', () => {
    const plain = join(dir, 'plain');
    mkdirSync(plain, { recursive: true });
    writeFileSync(join(plain, 'package.json'), JSON.stringify({ name: 'plain' }));
    expect(findJobModule(undefined, plain, {})).toBeUndefined();
    writeFileSync(join(plain, 'package.json'), JSON.stringify({ leaseq: { jobs: 3 } }));
    expect(() => findJobModule(undefined, plain, {})).toThrow(
      /"leaseq.jobs" must be the path of your job module/,
    );
  });
});

describe('Function: loadJobModule', () => {
  it('loads the default export of a job module', async () => {
    expect((await loadJobModule(LEDGER)).types()).toEqual(['ledger.credit', 'ledger.transfer']);
  });

  it('says what is wrong with a missing file, a module that fails, and one that exports no jobs', async () => {
    await expect(loadJobModule(join(dir, 'none.mjs'))).rejects.toThrow(
      /job module .*none\.mjs does not exist/,
    );
    writeFileSync(join(dir, 'broken.mjs'), 'throw new Error("boom at import");');
    await expect(loadJobModule(join(dir, 'broken.mjs'))).rejects.toThrow(/failed to load: boom at import/);
    writeFileSync(join(dir, 'empty.mjs'), 'export const answer = 42;');
    const error = await loadJobModule(join(dir, 'empty.mjs')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(
      /exports no jobs: expected `export default defineJobs\(\[\.\.\.\]\)`/,
    );
  });
});
