import { type Command, CommanderError } from 'commander';
import { safeLines, safeText } from './safe-text.ts';

/** A module of CLI subcommands: it adds its commands to the program it is given. */
export interface CommandModule {
  register(program: Command): void;
}

/** Where the CLI writes and what it reads, injectable for tests. */
export interface CliIo {
  readonly stderr: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
}

const defaultIo: CliIo = {
  stderr: (text) => process.stderr.write(text),
  env: process.env,
};

/**
 * Collapses any message to one line: the CLI reports an error as `leaseq: <one line>`. Control and bidi
 * characters left after that are escaped (safe-text.ts): an error message may quote a producer's text.
 */
export function oneLine(text: string): string {
  return safeText(
    text
      .trim()
      .replace(/\s*\n\s*/g, ' ')
      .replace(/\s+/g, ' '),
  );
}

/**
 * The line (or, with LEASEQ_DEBUG=1, the stack and cause chain) printed for an error thrown by a
 * command action.
 */
export function formatError(error: unknown, debug: boolean): string {
  const message = error instanceof Error ? error.message : String(error);
  const line = `leaseq: ${oneLine(message) || (error instanceof Error ? error.name : 'unknown error')}\n`;
  if (!debug) return line;
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && depth < 8; depth += 1) {
    parts.push(
      current instanceof Error ? (current.stack ?? `${current.name}: ${current.message}`) : String(current),
    );
    current = current instanceof Error ? current.cause : undefined;
  }
  return `${line}${safeLines(parts.join('\ncaused by: '))}\n`;
}

function configureTree(command: Command, io: CliIo): void {
  command.exitOverride();
  command.configureOutput({
    writeErr: io.stderr,
    // Commander's own errors (unknown command/option, bad argument): one line, same prefix as ours.
    outputError: (text, write) => write(`leaseq: ${oneLine(text.replace(/^error:\s*/, ''))}\n`),
  });
  for (const sub of command.commands) configureTree(sub, io);
}

/**
 * Parses `argv` and runs the matching action. Returns the exit code instead of exiting, so pending
 * output is flushed and tests can call it: 0 on success (and for --help/--version), commander's code for
 * usage errors, 1 for an error thrown by an action, or whatever an action set in `process.exitCode`.
 * Never lets a stack trace reach the user unless LEASEQ_DEBUG=1.
 */
export async function runCli(
  program: Command,
  argv: readonly string[],
  io: CliIo = defaultIo,
): Promise<number> {
  configureTree(program, io);
  try {
    await program.parseAsync([...argv]);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode;
    io.stderr(formatError(error, io.env.LEASEQ_DEBUG === '1'));
    return 1;
  }
}
