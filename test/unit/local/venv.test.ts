import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { EmulatorInstallError, PythonMissingError } from '../../../shared/local/emulator-errors.ts';
import { EMULATORS } from '../../../shared/local/emulators.ts';
import { checkPython, installEmulator, isInstalled, parsePythonVersion } from '../../../shared/local/venv.ts';
import { tempDir, writeScript } from './fixtures.ts';

const spec = EMULATORS.ministack;

/** A fake `python3`: reports `version`, and `-m venv DIR` makes a venv whose python runs `pip`. */
function fakePython(
  dir: string,
  options: { version?: string; venv?: 'ok' | 'no-ensurepip'; pip: string },
): string {
  const venvPython = `#!/bin/sh\n${options.pip}\n`;
  return writeScript(
    join(dir, 'python3'),
    `
if [ "$1" = "--version" ]; then echo "Python ${options.version ?? '3.11.7'}"; exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  ${options.venv === 'no-ensurepip' ? 'mkdir -p "$3"; echo "The virtual environment was not created successfully because ensurepip is not available." >&2; exit 1' : ''}
  mkdir -p "$3/bin"
  cat > "$3/bin/python" <<'PY'
${venvPython}PY
  chmod +x "$3/bin/python"
  exit 0
fi
exit 2`,
  );
}

const pipInstallsExecutable = `echo "Successfully installed ${spec.requirements[0]}"
printf '#!/bin/sh\\n' > "$(dirname "$0")/${spec.executable}"; chmod +x "$(dirname "$0")/${spec.executable}"`;

describe('Function: parsePythonVersion', () => {
  test('reads major and minor', () => {
    expect(parsePythonVersion('Python 3.11.7\n')).toEqual([3, 11]);
  });
  test('is undefined for anything else', () => {
    expect(parsePythonVersion('command not found')).toBeUndefined();
  });
});

describe('Function: checkPython', () => {
  let temp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    temp = tempDir();
  });
  afterEach(() => temp.remove());

  test('reports a missing interpreter in one line with what to do', async () => {
    const error = await checkPython('/nonexistent/python3', spec).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PythonMissingError);
    expect((error as Error).message).toBe(
      '/nonexistent/python3 not found; install Python 3.10+ with venv and pip (Debian/Ubuntu: apt-get install python3 python3-venv) or set LEASEQ_PYTHON',
    );
  });

  test('refuses a Python older than the emulator needs', async () => {
    const python = fakePython(temp.dir, { version: '3.8.10', pip: 'exit 0' });
    await expect(checkPython(python, spec)).rejects.toThrow(/is 3\.8 but ministack 1\.5\.33 needs 3\.10\+/);
  });

  test('accepts a new enough Python', async () => {
    const python = fakePython(temp.dir, { pip: 'exit 0' });
    await expect(checkPython(python, spec)).resolves.toBeUndefined();
  });
});

describe('Function: installEmulator', () => {
  let temp: ReturnType<typeof tempDir>;
  let paths: { venvDir: string; logFile: string };
  const lines: string[] = [];
  const options = (python: string) => ({
    python,
    timeoutMs: 30_000,
    log: (line: string) => lines.push(line),
  });
  beforeEach(() => {
    temp = tempDir();
    paths = { venvDir: join(temp.dir, 'venv'), logFile: join(temp.dir, 'emulator.log') };
    lines.length = 0;
  });
  afterEach(() => temp.remove());

  test('creates the venv, pip-installs the pinned requirement with constraints, and marks it installed', async () => {
    // Prepare: the fake pip records its arguments.
    const python = fakePython(temp.dir, { pip: `echo "pip args: $*"\n${pipInstallsExecutable}` });

    // Act
    const installed = await installEmulator(spec, paths, options(python));

    // Assess
    expect(installed).toBe(true);
    expect(isInstalled(spec, paths.venvDir)).toBe(true);
    const log = readFileSync(paths.logFile, 'utf8');
    expect(log).toContain(`pip args: -m pip install --disable-pip-version-check --no-input --constraint`);
    expect(log).toContain(spec.requirements[0]);
    expect(readFileSync(join(paths.venvDir, 'leaseq-constraints.txt'), 'utf8')).toContain(
      'Hypercorn==0.18.0',
    );
    expect(lines.some((line) => line.includes('installing ministack==1.5.33'))).toBe(true);
  });

  test('does nothing (not even run Python) when the same spec is already installed', async () => {
    await installEmulator(spec, paths, options(fakePython(temp.dir, { pip: pipInstallsExecutable })));

    expect(await installEmulator(spec, paths, options('/nonexistent/python3'))).toBe(false);
  });

  test('a venv that cannot be created (no ensurepip) is one line naming the Debian package and the log', async () => {
    const python = fakePython(temp.dir, { venv: 'no-ensurepip', pip: 'exit 0' });

    const error = await installEmulator(spec, paths, options(python)).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(EmulatorInstallError);
    expect((error as Error).message).toBe(
      `${python} -m venv failed (Debian/Ubuntu: apt-get install python3-venv); see ${paths.logFile}`,
    );
    expect(readFileSync(paths.logFile, 'utf8')).toContain('ensurepip is not available');
    expect(existsSync(paths.venvDir)).toBe(false);
  });

  test('a failed pip install points to the log and leaves the venv unmarked, so the next run retries', async () => {
    const python = fakePython(temp.dir, {
      pip: 'echo "ERROR: Could not find a version that satisfies the requirement" >&2; exit 1',
    });

    const error = await installEmulator(spec, paths, options(python)).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(EmulatorInstallError);
    expect((error as Error).message).toBe(
      `pip install ministack==1.5.33 exited with 1; see ${paths.logFile}`,
    );
    expect(readFileSync(paths.logFile, 'utf8')).toContain('Could not find a version');
    expect(isInstalled(spec, paths.venvDir)).toBe(false);
  });
});
