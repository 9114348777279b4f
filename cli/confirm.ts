import { createInterface } from 'node:readline/promises';
import { ConfigError } from '../shared/errors.ts';

/** A change a command is about to make, as the confirmation shows it. */
export interface Change {
  /** The verb, as in `refusing to <verb> ...` and `<verb> cancelled` (`redrive`, `purge`). */
  readonly verb: string;
  /** What it changes, where: queue and table names (the target line already gave account and region). */
  readonly what: string;
  /** The name a person types to confirm a change outside this machine: the queue or stack it changes. */
  readonly name: string;
  /** True on an emulator on this machine: y/N is enough there. */
  readonly local: boolean;
}

/** The terminal a confirmation talks to; injectable for tests. */
export interface ConfirmIo {
  /** A person can answer: stdin and stderr are terminals and CI is not set. */
  readonly interactive: boolean;
  ask(question: string): Promise<string>;
  note(line: string): void;
}

/** A change refused for want of confirmation: one line, exit 1. */
export class NotConfirmedError extends ConfigError {
  constructor(message: string) {
    super(message);
    this.name = 'NotConfirmedError';
  }
}

/** True when a person can be asked: both ends are terminals and no CI variable says otherwise. */
export function isInteractive(
  env: NodeJS.ProcessEnv = process.env,
  stdinTty = process.stdin.isTTY === true,
  stderrTty = process.stderr.isTTY === true,
): boolean {
  const ci = env.CI?.trim().toLowerCase();
  return stdinTty && stderrTty && (ci === undefined || ci === '' || ci === 'false' || ci === '0');
}

function terminalIo(): ConfirmIo {
  return {
    interactive: isInteractive(),
    ask: async (question) => {
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      try {
        return await rl.question(question);
      } finally {
        rl.close();
      }
    },
    note: (line) => process.stderr.write(`leaseq: ${line}\n`),
  };
}

/**
 * Asks before a change: prints what it changes, then with `yes` goes on; without a person to ask
 * refuses (NotConfirmedError); on a terminal asks y/N for a local emulator and the name to type
 * anywhere else (a remote endpoint, real AWS). Returns false when the person declined (nothing done).
 */
export async function confirmChange(
  change: Change,
  yes: boolean | undefined,
  io: ConfirmIo = terminalIo(),
): Promise<boolean> {
  if (!yes && !io.interactive) {
    throw new NotConfirmedError(
      `refusing to ${change.verb} ${change.name} without confirmation: not a terminal, pass --yes`,
    );
  }
  io.note(`${change.verb}: ${change.what}`);
  if (yes) return true;
  const answer = change.local
    ? await io.ask(`${change.verb} ${change.name}? [y/N] `)
    : await io.ask(`type ${change.name} to ${change.verb} it (anything else cancels): `);
  const ok = change.local ? /^y(es)?$/i.test(answer.trim()) : answer.trim() === change.name;
  if (!ok) io.note(`${change.verb} cancelled; nothing was changed`);
  return ok;
}
