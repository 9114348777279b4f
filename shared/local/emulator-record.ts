/**
 * The records of who runs and who holds the embedded emulator: the state file (`emulator.json`) and the
 * holder files of test sessions. A record counts only while its process lives, because a crashed
 * leaseq or emulator leaves its files behind.
 */
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ANY_CREDENTIAL, readLocalCredential } from '../aws/local-credential.ts';
import { display, endpointFor, type ResolvedOptions } from './emulator-config.ts';
import { EmulatorStartError } from './emulator-errors.ts';
import { GUARD_FILE } from './emulator-guard.ts';
import { waitUntilAnswering } from './emulator-probe.ts';
import { EMULATORS, isEmulatorName } from './emulators.ts';
import { isProcessAlive, processCommandLine } from './process.ts';
import { type EmulatorState, readEmulatorState, removeEmulatorState } from './state.ts';

/**
 * The recorded emulator when its process is alive, after waiting for it to answer. A record whose
 * process is gone (or is now some other program) is removed.
 */
export async function recordedEmulator(cfg: ResolvedOptions): Promise<EmulatorState | undefined> {
  const state = liveRecordedState(cfg);
  if (!state) return undefined;
  // Records are written only once the process answered (under the lock), so a live one that stays
  // silent for a few seconds is hung, not starting.
  const deadline = Date.now() + Math.min(cfg.startTimeoutMs, 5000);
  // Signed with the credential of its start (an emulator an older leaseq started has none, and takes any).
  const answered = await waitUntilAnswering(
    endpointFor(state.port),
    deadline,
    () => (isProcessAlive(state.pid) ? undefined : 'exited'),
    readLocalCredential(cfg.stateDir) ?? ANY_CREDENTIAL,
  );
  if (answered === 'ready') return state;
  if (answered === 'exited') {
    removeEmulatorState(cfg.stateFile);
    return undefined;
  }
  throw new EmulatorStartError(
    `the emulator (pid ${state.pid}, port ${state.port}) is running but does not answer; run \`leaseq local down\` and try again`,
    display(cfg.logFile),
  );
}

/** Reads the state file and drops it when its process is gone or is not the emulator any more. */
export function liveRecordedState(cfg: ResolvedOptions): EmulatorState | undefined {
  const state = readEmulatorState(cfg.stateFile);
  if (!state) return undefined;
  if (!isProcessAlive(state.pid) || !looksLikeEmulator(state)) {
    removeEmulatorState(cfg.stateFile);
    return undefined;
  }
  return state;
}

/**
 * Guards against PID reuse: the recorded PID must still run the emulator, through leaseq's guard
 * launcher (MiniStack) or its own executable (moto, and MiniStack records of older leaseq versions).
 */
function looksLikeEmulator(state: EmulatorState): boolean {
  const commandLine = processCommandLine(state.pid);
  if (commandLine === undefined) return true; // no /proc: trust the PID
  const spec = isEmulatorName(state.emulator) ? EMULATORS[state.emulator] : undefined;
  return spec ? commandLine.includes(GUARD_FILE) || commandLine.includes(spec.executable) : false;
}

/** Counts holder files whose process is alive, removing the others. */
export function liveHolders(cfg: ResolvedOptions): number {
  let entries: string[];
  try {
    entries = readdirSync(cfg.holdersDir);
  } catch {
    return 0;
  }
  let live = 0;
  for (const entry of entries) {
    const pid = Number(entry.split('-')[0]);
    if (Number.isInteger(pid) && pid > 0 && isProcessAlive(pid)) live += 1;
    else rmSync(join(cfg.holdersDir, entry), { force: true });
  }
  return live;
}
