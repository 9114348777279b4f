import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { isProcessAlive, sleep } from './process.ts';

/**
 * A process in which MiniStack runs a function: `node <tmp>/ministack-lambda-<function>-<random>/_worker.js`
 * (or `_worker.py`), started by the emulator with its own environment plus the function's.
 */
export interface FunctionWorker {
  readonly pid: number;
  readonly functionName: string;
  /** `<tmp>/ministack-lambda-<function>-<random>`: the code the emulator unpacked for this process. */
  readonly folder: string;
}

const WORKER_SCRIPT = /(\/[^\0]*\/ministack-lambda-[^/\0]+)\/_worker\.(?:js|py)(?:\0|$)/;

/**
 * The function processes of the emulator listening on `port` (Linux `/proc`; empty elsewhere). A process
 * counts as this emulator's only when its environment says so (the emulator's `GATEWAY_PORT`, or the
 * port of the `AWS_ENDPOINT_URL` the emulator gives its functions): emulators on other ports run
 * functions of the same name in folders of the same name, and those are left alone.
 */
export function functionWorkers(port: number, functionNames?: ReadonlySet<string>): FunctionWorker[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const workers: FunctionWorker[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const folder = WORKER_SCRIPT.exec(readFileSync(`/proc/${entry}/cmdline`, 'utf8'))?.[1];
      if (!folder) continue;
      const env = new Map(
        readFileSync(`/proc/${entry}/environ`, 'utf8')
          .split('\0')
          .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)] as const),
      );
      if (emulatorPort(env) !== port) continue;
      const functionName = env.get('AWS_LAMBDA_FUNCTION_NAME') ?? '';
      // The folder name is the emulator's `mkdtemp(prefix=f"ministack-lambda-{name}-")`.
      if (!basename(folder).startsWith(`ministack-lambda-${functionName}-`)) continue;
      if (functionNames && !functionNames.has(functionName)) continue;
      workers.push({ pid: Number(entry), functionName, folder });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return workers;
}

function emulatorPort(env: ReadonlyMap<string, string>): number | undefined {
  const gateway = env.get('GATEWAY_PORT') ?? env.get('EDGE_PORT');
  if (gateway && /^\d+$/.test(gateway)) return Number(gateway);
  try {
    const url = new URL(env.get('AWS_ENDPOINT_URL') ?? '');
    return Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  } catch {
    return undefined;
  }
}

/**
 * Stops `workers` (SIGTERM, SIGKILL after `graceMs`) and removes their folders. The emulator keeps a
 * function's processes running after CloudFormation deleted the function, and never removes the folder
 * of a process it did not stop itself. Returns how many processes were stopped.
 */
export async function stopFunctionWorkers(
  workers: readonly FunctionWorker[],
  graceMs = 3000,
): Promise<number> {
  for (const w of workers) signal(w.pid, 'SIGTERM');
  const until = Date.now() + graceMs;
  while (workers.some((w) => isProcessAlive(w.pid)) && Date.now() < until) await sleep(100);
  for (const w of workers.filter((w) => isProcessAlive(w.pid))) signal(w.pid, 'SIGKILL');
  removeWorkerFolders(workers);
  return workers.length;
}

/** Removes the folders of stopped function processes; a folder another live process still runs in stays. */
export function removeWorkerFolders(workers: readonly FunctionWorker[]): void {
  for (const w of workers) {
    // Only the emulator's own folder layout: never a path that merely came from a command line.
    if (!basename(w.folder).startsWith('ministack-lambda-') || dirname(w.folder) === w.folder) continue;
    if (isProcessAlive(w.pid)) continue;
    rmSync(w.folder, { recursive: true, force: true });
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // already gone
  }
}
