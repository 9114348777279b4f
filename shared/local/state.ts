import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { z } from 'zod';

/** What `.leaseq/emulator.json` records about the emulator leaseq started. */
export interface EmulatorState {
  /** Process id of the emulator; it leads its own process group, so `down` signals `-pid`. */
  readonly pid: number;
  readonly port: number;
  /** Always 127.0.0.1: the embedded emulator never listens on other interfaces. */
  readonly host: string;
  /** Emulator name and pinned version, e.g. `ministack` and `1.5.33`. */
  readonly emulator: string;
  readonly version: string;
  /** ISO 8601 time the process was started. */
  readonly startedAt: string;
  /** Milliseconds from spawning the process to its first answer. */
  readonly startupMs: number;
  /**
   * True when a test session started it: the last session to release it stops it. False (or absent)
   * when a person or script started or pinned it with `leaseq local up`: only `local down` stops it.
   */
  readonly autoStop?: boolean;
  /** What it serves (`emulator-config.ts`); absent in records written before it was chosen: `all`. */
  readonly services?: 'queues-and-tables' | 'all';
  /** The Node it runs `nodejs*` functions on (`function-node.ts`); absent in older records. */
  readonly node?: { readonly path: string; readonly version: string };
}

const stateSchema = z.object({
  pid: z.number().int().positive(),
  port: z.number().int().min(1).max(65_535),
  host: z.string().min(1),
  emulator: z.string().min(1),
  version: z.string().min(1),
  startedAt: z.string().min(1),
  startupMs: z.number().nonnegative(),
  autoStop: z.boolean().optional(),
  services: z.enum(['queues-and-tables', 'all']).optional(),
  node: z.object({ path: z.string().min(1), version: z.string().min(1) }).optional(),
});

/**
 * Parses the state file's text. Returns `undefined` for anything that is not a complete, valid record
 * (a torn write, a hand edit, a file from an older layout): the caller then treats the emulator as
 * not started by us, which is safe because `up` re-checks the port before starting another.
 */
export function parseEmulatorState(text: string): EmulatorState | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = stateSchema.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

/** Reads the state file; `undefined` when it is absent or invalid. */
export function readEmulatorState(file: string): EmulatorState | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  return parseEmulatorState(text);
}

/** Writes the state file atomically (write a sibling, then rename), so a reader never sees half of it. */
export function writeEmulatorState(file: string, state: EmulatorState): void {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`);
  renameSync(tmp, file);
}

export function removeEmulatorState(file: string): void {
  rmSync(file, { force: true });
}
