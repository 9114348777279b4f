import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** One `npm install ...` command as the docs give it: its words after `npm`, and the line it came from. */
export interface DocumentedInstall {
  readonly args: readonly string[];
  readonly line: string;
}

/**
 * The `npm install` commands of the first fenced shell block after `heading` (a Markdown heading line),
 * in order: comments dropped, `a && b` read as two commands. What the docs tell a user to type, so a test
 * can type exactly that.
 */
export function documentedInstalls(markdown: string, heading: string): DocumentedInstall[] {
  const lines = markdown.split('\n');
  const at = lines.findIndex((line) => line.trim() === heading);
  if (at < 0) throw new Error(`no heading ${JSON.stringify(heading)} in the page`);
  const open = lines.findIndex((line, i) => i > at && /^```(?:bash|sh|shell)\s*$/.test(line.trim()));
  if (open < 0) throw new Error(`no shell block after ${JSON.stringify(heading)}`);
  const installs: DocumentedInstall[] = [];
  for (let i = open + 1; i < lines.length && !lines[i]?.startsWith('```'); i += 1) {
    const line = (lines[i] ?? '').replace(/(^|\s)#.*$/, '').trim();
    for (const command of line.split('&&')) {
      const words = command.trim().split(/\s+/).filter(Boolean);
      if (words[0] === 'npm' && ['install', 'i', 'add'].includes(words[1] ?? '')) {
        installs.push({ args: words.slice(1), line: line });
      }
    }
  }
  if (installs.length === 0) throw new Error(`no npm install line after ${JSON.stringify(heading)}`);
  return installs;
}

/**
 * Runs one documented install in `cwd`, the package `leaseq` read as `tarball`; `extra` flags go after
 * the user's words (`--dry-run`, `--no-audit`). A refusal names the documented line and npm's first
 * error lines (an ERESOLVE says which peer range did not fit).
 */
export async function runDocumented(
  install: DocumentedInstall,
  cwd: string,
  tarball: string,
  extra: readonly string[] = [],
): Promise<void> {
  const args = install.args.map((word) => (word === 'leaseq' ? tarball : word));
  try {
    await run('npm', [...args, '--no-audit', '--no-fund', ...extra], {
      cwd,
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? error);
    const first = stderr
      .split('\n')
      .filter((l) => /npm (error|ERR)/.test(l))
      .slice(0, 8)
      .join('\n');
    throw new Error(`the documented line \`${install.line}\` failed:\n${first || stderr.slice(0, 2000)}`);
  }
}
