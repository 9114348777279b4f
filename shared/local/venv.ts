import { spawn } from 'node:child_process';
import { closeSync, existsSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { EmulatorInstallError, PythonMissingError } from './emulator-errors.ts';
import type { EmulatorSpec } from './emulators.ts';
import { openPrivateLog } from './private-files.ts';

/** Where the emulator's virtualenv lives and where its install output goes. */
export interface VenvPaths {
  readonly venvDir: string;
  readonly logFile: string;
}

/** Written into the virtualenv after a complete install; its absence means "install (again)". */
const MARKER = 'leaseq-emulator.json';

export function venvExecutable(venvDir: string, name: string): string {
  return process.platform === 'win32' ? join(venvDir, 'Scripts', `${name}.exe`) : join(venvDir, 'bin', name);
}

function markerText(spec: EmulatorSpec): string {
  return JSON.stringify({ requirements: spec.requirements, constraints: spec.constraints });
}

/** Records that `venvDir` holds a complete install of `spec`. */
export function markInstalled(spec: EmulatorSpec, venvDir: string): void {
  writeFileSync(join(venvDir, MARKER), markerText(spec));
}

/** True when `venvDir` holds a finished install of exactly this spec. */
export function isInstalled(spec: EmulatorSpec, venvDir: string): boolean {
  try {
    const marker = readFileSync(join(venvDir, MARKER), 'utf8');
    return marker === markerText(spec) && existsSync(venvExecutable(venvDir, spec.executable));
  } catch {
    return false;
  }
}

/** Parses `Python 3.11.7` into [3, 11]. */
export function parsePythonVersion(text: string): readonly [number, number] | undefined {
  const match = /Python (\d+)\.(\d+)/.exec(text);
  if (!match?.[1] || !match[2]) return undefined;
  return [Number(match[1]), Number(match[2])];
}

interface RunResult {
  readonly code: number | null;
  readonly output: string;
  readonly spawnError?: NodeJS.ErrnoException;
}

/** Runs a command to completion, appending its output to `logFd` (when given) and returning it. */
function run(
  command: string,
  args: readonly string[],
  options: { logFd?: number; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<RunResult> {
  return new Promise((resolve) => {
    // Our own timer, not spawn's `timeout`: that one keeps the process alive until it fires even when
    // the command could not be started at all.
    const child = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: options.env ?? process.env,
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    let output = '';
    const collect = (chunk: Buffer): void => {
      output += chunk.toString();
      if (options.logFd !== undefined) writeSync(options.logFd, chunk);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ code: null, output, spawnError: error });
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/**
 * Checks that `python` exists and is new enough.
 * @throws PythonMissingError
 */
export async function checkPython(python: string, spec: EmulatorSpec): Promise<void> {
  const result = await run(python, ['--version'], { timeoutMs: 15_000 });
  if (result.spawnError) {
    const detail =
      result.spawnError.code === 'ENOENT' ? 'not found' : `cannot run (${result.spawnError.code})`;
    throw new PythonMissingError(python, detail, result.spawnError);
  }
  const version = parsePythonVersion(result.output);
  if (result.code !== 0 || !version) throw new PythonMissingError(python, 'did not report its version');
  const [major, minor] = version;
  const [needMajor, needMinor] = spec.minPython;
  if (major < needMajor || (major === needMajor && minor < needMinor)) {
    throw new PythonMissingError(
      python,
      `is ${major}.${minor} but ${spec.name} ${spec.version} needs ${needMajor}.${needMinor}+`,
    );
  }
}

/**
 * Creates the virtualenv and pip-installs the pinned emulator into it, unless a complete install of
 * the same spec is already there. Needs only python3 (with venv + pip) and PyPI.
 * @throws PythonMissingError | EmulatorInstallError
 */
export async function installEmulator(
  spec: EmulatorSpec,
  paths: VenvPaths,
  options: { python: string; timeoutMs: number; log: (line: string) => void },
): Promise<boolean> {
  if (isInstalled(spec, paths.venvDir)) return false;
  await checkPython(options.python, spec);

  const logFd = openPrivateLog(paths.logFile);
  const note = (line: string): void => {
    writeSync(logFd, `[leaseq ${new Date().toISOString()}] ${line}\n`);
  };
  try {
    const venvPython = venvExecutable(paths.venvDir, 'python');
    if (!existsSync(venvPython)) {
      options.log(`creating the Python virtualenv ${paths.venvDir} (first use)`);
      note(`${options.python} -m venv ${paths.venvDir}`);
      const created = await run(options.python, ['-m', 'venv', paths.venvDir], {
        logFd,
        timeoutMs: options.timeoutMs,
      });
      if (created.code !== 0) {
        // A half-made venv would make the next attempt skip creation; remove it.
        rmSync(paths.venvDir, { recursive: true, force: true });
        const hint = /ensurepip|venv/i.test(created.output)
          ? ' (Debian/Ubuntu: apt-get install python3-venv)'
          : '';
        throw new EmulatorInstallError(`${options.python} -m venv failed${hint}`, paths.logFile);
      }
    }

    const constraintsFile = join(paths.venvDir, 'leaseq-constraints.txt');
    writeFileSync(constraintsFile, `${spec.constraints.join('\n')}\n`);
    const what = spec.requirements.join(' ');
    options.log(`installing ${what} from PyPI into ${paths.venvDir} (first use; this takes a minute)`);
    note(`pip install ${what}`);
    const pip = await run(
      venvPython,
      [
        '-m',
        'pip',
        'install',
        '--disable-pip-version-check',
        '--no-input',
        '--constraint',
        constraintsFile,
        ...spec.requirements,
      ],
      { logFd, timeoutMs: options.timeoutMs, env: { ...process.env, PIP_NO_INPUT: '1' } },
    );
    if (pip.code !== 0) {
      const reason = pip.code === null ? 'timed out or could not run' : `exited with ${pip.code}`;
      throw new EmulatorInstallError(`pip install ${what} ${reason}`, paths.logFile);
    }
    if (!existsSync(venvExecutable(paths.venvDir, spec.executable))) {
      throw new EmulatorInstallError(`pip install ${what} did not provide ${spec.executable}`, paths.logFile);
    }
    markInstalled(spec, paths.venvDir);
    note('install complete');
    return true;
  } finally {
    closeSync(logFd);
  }
}
