// `npm run test:localstack`: the integration files that exercise SQS (test/localstack/files.txt), with SQS
// on LocalStack (host mode, no Docker: ./localstack.ts) and DynamoDB, S3 and the rest on the embedded
// emulator the test harness starts as usual (or AWS_ENDPOINT_URL, when set). Failures that are LocalStack
// differing from AWS are listed in test/localstack/gaps.json with AWS's documented behaviour: they are
// reported as such at the end, never skipped; any other failure fails the run.
//
//   npm run test:localstack                 every file of files.txt
//   npm run test:localstack -- --short      the files marked `short` (what .ci/run runs)
//   npm run test:localstack -- <file>...    those files only
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../support/free-port.ts';
import {
  assertLoopbackOnly,
  ensureLocalStack,
  LocalStackSetupError,
  type RunningLocalStack,
  startLocalStack,
} from './localstack.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HERE = fileURLToPath(new URL('./', import.meta.url));
const STATE = process.env.LEASEQ_STATE_DIR?.trim() || join(ROOT, '.leaseq');
const WORK = join(STATE, 'localstack');
const started = Date.now();

function say(line: string): void {
  process.stderr.write(`[localstack +${Math.round((Date.now() - started) / 1000)}s] ${line}\n`);
}

/** A LocalStack gap: a test LocalStack fails because it differs from AWS, with AWS's documented behaviour. */
interface Gap {
  readonly file: string;
  /** The test's full name (describe blocks and title, joined by spaces). */
  readonly test: string;
  /** `localstack`: LocalStack differs from AWS; `test`: the test relies on what AWS leaves undefined. */
  readonly kind: 'localstack' | 'test';
  readonly localstack: string;
  readonly aws: string;
  readonly doc: string;
}

/** files.txt: one file a line, `short` after it for the CI subset, `#` comments. */
function listedFiles(short: boolean): string[] {
  return readFileSync(join(HERE, 'files.txt'), 'utf8')
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim())
    .filter(Boolean)
    .filter((line) => !short || /\sshort$/.test(line))
    .map((line) => line.split(/\s+/)[0] as string);
}

interface VitestReport {
  readonly testResults: readonly {
    readonly name: string;
    readonly status: string;
    readonly message?: string;
    readonly assertionResults: readonly { readonly fullName: string; readonly status: string }[];
  }[];
}

function runVitest(files: readonly string[], sqs: string, reportFile: string): Promise<number> {
  const vitest = join(ROOT, 'node_modules', '.bin', 'vitest');
  const args = ['run', ...files, '--reporter=default', '--reporter=json', `--outputFile.json=${reportFile}`];
  return new Promise((resolve) => {
    const child = spawn(vitest, args, {
      cwd: ROOT,
      stdio: 'inherit',
      env: {
        ...process.env,
        AWS_ENDPOINT_URL_SQS: sqs,
        LEASEQ_TEST_WORKERS: process.env.LEASEQ_TEST_WORKERS ?? '3',
      },
    });
    child.once('exit', (code) => resolve(code ?? 1));
  });
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  const short = argv.includes('--short');
  const named = argv.filter((a) => !a.startsWith('--'));
  const files = named.length > 0 ? named : listedFiles(short);
  const gaps = JSON.parse(readFileSync(join(HERE, 'gaps.json'), 'utf8')) as Gap[];
  mkdirSync(WORK, { recursive: true, mode: 0o700 });
  const python = ensureLocalStack(join(WORK, 'venv'), join(WORK, 'install.log'), say);
  const port = await freePort();
  let localstack: RunningLocalStack | undefined;
  const stop = async () => {
    const running = localstack;
    localstack = undefined;
    if (running) {
      await running.stop();
      say(`stopped LocalStack (pid ${running.pid})`);
    }
  };
  const onSignal = () => void stop().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    rmSync(join(WORK, 'run'), { recursive: true, force: true });
    localstack = await startLocalStack({
      python,
      port,
      workDir: join(WORK, 'run'),
      logFile: join(WORK, 'localstack.log'),
    });
    const sockets = assertLoopbackOnly(localstack.pid);
    say(
      `LocalStack 4.14.0 serves SQS on ${localstack.endpoint} (pid ${localstack.pid}; listening: ${sockets.join(', ')})`,
    );
    say(
      `SQS on LocalStack (AWS_ENDPOINT_URL_SQS); DynamoDB, S3 and the rest on ${process.env.AWS_ENDPOINT_URL ?? 'the embedded emulator'}`,
    );
    say(`running ${files.length} files`);
    const reportFile = join(WORK, 'report.json');
    rmSync(reportFile, { force: true });
    const code = await runVitest(files, localstack.endpoint, reportFile);
    await stop();
    if (!existsSync(reportFile)) {
      say(`vitest wrote no report (exit ${code})`);
      return code || 1;
    }
    return judge(JSON.parse(readFileSync(reportFile, 'utf8')) as VitestReport, gaps, code);
  } finally {
    await stop();
  }
}

/** Sorts the failures into LocalStack gaps (listed) and unexpected ones, and prints both and the list. */
function judge(report: VitestReport, gaps: readonly Gap[], code: number): number {
  const results = report.testResults.flatMap((file) =>
    file.assertionResults.map((t) => ({ file: file.name.slice(ROOT.length), ...t })),
  );
  const failed = results.filter((t) => t.status === 'failed');
  const isGap = (t: { file: string; fullName: string }) =>
    gaps.find((g) => g.file === t.file && g.test === t.fullName);
  const known = failed.filter(isGap);
  const unexpected = failed.filter((t) => !isGap(t));
  // A file that failed outside any test (a hook, an import) fails the run too.
  const brokenFiles = report.testResults.filter(
    (f) => f.status === 'failed' && f.assertionResults.every((t) => t.status !== 'failed'),
  );
  const passed = results.filter((t) => t.status === 'passed').length;
  const ran = new Set(results.map((t) => `${t.file} > ${t.fullName}`));
  process.stderr.write(
    '\nKnown failures on LocalStack (test/localstack/gaps.json): [localstack] LocalStack differs from AWS; [test] the test relies on what AWS leaves undefined\n',
  );
  for (const gap of gaps) {
    const seen = failed.some((t) => t.file === gap.file && t.fullName === gap.test);
    const state = seen
      ? 'failed as listed'
      : ran.has(`${gap.file} > ${gap.test}`)
        ? 'passed this run'
        : 'not run';
    process.stderr.write(
      `- [${gap.kind}] ${gap.file} > ${gap.test} (${state})\n    LocalStack: ${gap.localstack}\n    AWS: ${gap.aws}\n    ${gap.doc}\n`,
    );
  }
  for (const t of unexpected) process.stderr.write(`UNEXPECTED FAILURE: ${t.file} > ${t.fullName}\n`);
  for (const f of brokenFiles)
    process.stderr.write(`FILE FAILED: ${f.name.slice(ROOT.length)}: ${f.message ?? ''}\n`);
  const seconds = Math.round((Date.now() - started) / 1000);
  process.stderr.write(
    `\nLocalStack run: ${passed} passed, ${known.length} failed as listed (gaps.json), ${unexpected.length} failed otherwise, ${results.length - passed - failed.length} skipped; ${seconds} s\n`,
  );
  if (unexpected.length > 0 || brokenFiles.length > 0) return code || 1;
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `test:localstack: ${error instanceof LocalStackSetupError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
