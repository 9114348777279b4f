/**
 * Measures every emulator candidate for docs/emulators.md: install time and size, startup time (process
 * start to first answer), resident memory, and the conformance suite's result per test, over several
 * rounds. Each candidate gets its own state directory and port, installed fresh from PyPI.
 *
 *   npx tsx test/conformance/measure.ts [--rounds 3] [--starts 5] [--keep]
 *
 * Prints a Markdown report on stdout; progress goes to stderr.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureEmulator, stopEmulator } from '../../shared/local/emulator.ts';
import { EMULATOR_NAMES, EMULATORS, type EmulatorName } from '../../shared/local/emulators.ts';
import { processRssBytes } from '../../shared/local/process.ts';

interface TestOutcome {
  readonly title: string;
  readonly passed: number;
  readonly failed: number;
  readonly observed: Set<string>;
  readonly failures: Set<string>;
}

interface CandidateResult {
  readonly name: EmulatorName;
  readonly version: string;
  readonly installMs: number;
  readonly venvBytes: number;
  readonly coldStartMs: number;
  readonly warmStartsMs: number[];
  readonly idleRssBytes: number | undefined;
  readonly afterSuiteRssBytes: number | undefined;
  readonly suiteMs: number[];
  readonly tests: Map<string, TestOutcome>;
}

const { values: flags } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    starts: { type: 'string', default: '5' },
    keep: { type: 'boolean', default: false },
  },
});
const rounds = Number(flags.rounds);
const starts = Number(flags.starts);
const projectDir = new URL('../../', import.meta.url).pathname;

function note(line: string): void {
  process.stderr.write(`[measure] ${line}\n`);
}

function directoryBytes(path: string): number {
  let total = 0;
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const full = join(path, entry.name);
    if (entry.isDirectory()) total += directoryBytes(full);
    else if (entry.isFile()) total += statSync(full).size;
  }
  return total;
}

interface JsonReport {
  testResults: Array<{
    assertionResults: Array<{
      title: string;
      ancestorTitles: string[];
      status: string;
      meta?: { observed?: string };
      failureMessages?: string[] | null;
    }>;
  }>;
}

function runSuite(endpoint: string, outputFile: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'npx',
      [
        'vitest',
        'run',
        '--project',
        'integration',
        'test/conformance',
        '--reporter=json',
        `--outputFile=${outputFile}`,
      ],
      {
        cwd: projectDir,
        stdio: ['ignore', 'ignore', 'inherit'],
        env: {
          ...process.env,
          AWS_ENDPOINT_URL: endpoint,
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        },
      },
    );
    child.once('error', reject);
    child.once('close', () => resolve());
  });
}

async function measure(name: EmulatorName, port: number, workDir: string): Promise<CandidateResult> {
  const stateDir = join(workDir, name);
  note(`${name}: fresh install into ${stateDir}`);
  const installStart = performance.now();
  const first = await ensureEmulator({ stateDir, emulator: name, port, env: {}, log: note });
  const firstMs = performance.now() - installStart;
  const coldStartMs = first.startupMs ?? Number.NaN;
  const installMs = firstMs - coldStartMs;
  try {
    return await measureRunning(name, port, stateDir, installMs, coldStartMs);
  } finally {
    await stopEmulator({ stateDir, emulator: name, env: {} });
  }
}

async function measureRunning(
  name: EmulatorName,
  port: number,
  stateDir: string,
  installMs: number,
  coldStartMs: number,
): Promise<CandidateResult> {
  const spec = EMULATORS[name];
  const venvBytes = readdirSync(stateDir)
    .filter((entry) => entry.startsWith('venv'))
    .reduce((sum, entry) => sum + directoryBytes(join(stateDir, entry)), 0);

  const warmStartsMs: number[] = [];
  for (let i = 0; i < starts; i += 1) {
    await stopEmulator({ stateDir, emulator: name, env: {} });
    const handle = await ensureEmulator({ stateDir, emulator: name, port, env: {} });
    warmStartsMs.push(handle.startupMs ?? Number.NaN);
  }
  const running = await ensureEmulator({ stateDir, emulator: name, port, env: {} });
  if (running.pid === undefined) throw new Error('no pid');
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const idleRssBytes = processRssBytes(running.pid);

  const tests = new Map<string, TestOutcome>();
  const suiteMs: number[] = [];
  for (let round = 1; round <= rounds; round += 1) {
    note(`${name}: conformance round ${round}/${rounds}`);
    const outputFile = join(workDir, `${name}-${round}.json`);
    const t0 = performance.now();
    await runSuite(running.endpoint, outputFile);
    suiteMs.push(performance.now() - t0);
    const report = JSON.parse(readFileSync(outputFile, 'utf8')) as JsonReport;
    for (const file of report.testResults) {
      for (const result of file.assertionResults) {
        const title = [...result.ancestorTitles, result.title].join(' > ');
        const outcome = tests.get(title) ?? {
          title,
          passed: 0,
          failed: 0,
          observed: new Set<string>(),
          failures: new Set<string>(),
        };
        const counted =
          result.status === 'passed'
            ? { ...outcome, passed: outcome.passed + 1 }
            : { ...outcome, failed: outcome.failed + 1 };
        if (result.meta?.observed) counted.observed.add(result.meta.observed);
        const firstLine = result.failureMessages?.[0]?.split('\n')[0];
        if (result.status !== 'passed' && firstLine) counted.failures.add(firstLine.slice(0, 160));
        tests.set(title, counted);
      }
    }
  }
  const afterSuiteRssBytes = processRssBytes(running.pid);
  return {
    name,
    version: spec.version,
    installMs,
    venvBytes,
    coldStartMs,
    warmStartsMs,
    idleRssBytes,
    afterSuiteRssBytes,
    suiteMs,
    tests,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

const mib = (bytes: number | undefined): string =>
  bytes === undefined ? 'n/a' : `${(bytes / 1048576).toFixed(0)} MiB`;
const secs = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

function report(results: CandidateResult[]): string {
  const lines: string[] = [];
  lines.push(`| behaviour | ${results.map((r) => `${r.name} ${r.version}`).join(' | ')} |`);
  lines.push(`|---|${results.map(() => '---').join('|')}|`);
  const titles = [...new Set(results.flatMap((r) => [...r.tests.keys()]))];
  for (const title of titles) {
    const cells = results.map((r) => {
      const outcome = r.tests.get(title);
      if (!outcome) return 'not run';
      const verdict = outcome.failed === 0 ? 'pass' : outcome.passed === 0 ? '**FAIL**' : '**FLAKY**';
      const observed = outcome.observed.size ? ` (${[...outcome.observed].join('; ')})` : '';
      return `${verdict} ${outcome.passed}/${outcome.passed + outcome.failed}${observed}`;
    });
    lines.push(`| ${title.replace(/\|/g, '\\|')} | ${cells.join(' | ')} |`);
  }
  const totals = results.map((r) => {
    const all = [...r.tests.values()];
    return `${all.filter((t) => t.failed === 0).length}/${all.length} pass`;
  });
  lines.push(`| **total** | ${totals.join(' | ')} |`);
  lines.push('');
  lines.push(`| measure | ${results.map((r) => r.name).join(' | ')} |`);
  lines.push(`|---|${results.map(() => '---').join('|')}|`);
  lines.push(`| install (venv + pip, fresh) | ${results.map((r) => secs(r.installMs)).join(' | ')} |`);
  lines.push(`| virtualenv size | ${results.map((r) => mib(r.venvBytes)).join(' | ')} |`);
  lines.push(`| first start after install | ${results.map((r) => secs(r.coldStartMs)).join(' | ')} |`);
  lines.push(
    `| start, median of ${starts} (min-max) | ${results
      .map(
        (r) =>
          `${secs(median(r.warmStartsMs))} (${secs(Math.min(...r.warmStartsMs))}-${secs(Math.max(...r.warmStartsMs))})`,
      )
      .join(' | ')} |`,
  );
  lines.push(`| RSS idle after start | ${results.map((r) => mib(r.idleRssBytes)).join(' | ')} |`);
  lines.push(
    `| RSS after ${rounds} suite rounds | ${results.map((r) => mib(r.afterSuiteRssBytes)).join(' | ')} |`,
  );
  lines.push(`| suite wall time, median | ${results.map((r) => secs(median(r.suiteMs))).join(' | ')} |`);
  for (const r of results) {
    for (const outcome of r.tests.values()) {
      for (const failure of outcome.failures) lines.push(`\n- ${r.name}: ${outcome.title}: ${failure}`);
    }
  }
  return lines.join('\n');
}

const workDir = mkdtempSync(join(tmpdir(), 'leaseq-emulators-'));
const results: CandidateResult[] = [];
try {
  let port = 4610;
  for (const name of EMULATOR_NAMES) results.push(await measure(name, port++, workDir));
} finally {
  if (!flags.keep) rmSync(workDir, { recursive: true, force: true });
  else note(`kept ${workDir}`);
}
process.stdout.write(`${report(results)}\n`);
