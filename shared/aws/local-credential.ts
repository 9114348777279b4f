/**
 * The embedded emulator's credential. Each start of the emulator makes a new access key id and secret,
 * kept in `emulator-credential.json` of the state directory (owner-only, in an owner-only directory), and
 * the emulator refuses every request that is not SigV4-signed with it (`shared/local/emulator-guard.ts`).
 * Every client leaseq builds for a loopback endpoint reads it from there, so leaseq's own commands,
 * workers and tests need no setup; `leaseq local env` prints it for other tools.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fstatSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The credential's file name in the state directory. */
export const CREDENTIAL_FILE = 'emulator-credential.json';

export interface LocalCredential {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/** The credential file: the credential and the port of the emulator it belongs to. */
export interface StoredCredential extends LocalCredential {
  readonly port: number;
}

/**
 * The key id MiniStack gives the functions it runs (their account id, `000000000000`), which they sign
 * with beside the emulator's secret; the emulator accepts it with that secret only.
 */
export const FUNCTION_ACCESS_KEY_ID = '000000000000';

/** The credential of emulators that take any (LocalStack, moto): used when no state holds one. */
export const ANY_CREDENTIAL: LocalCredential = { accessKeyId: 'test', secretAccessKey: 'test' };

/**
 * Where `.leaseq/` (venv, state file, log) lives: this checkout's root when run from the source tree; the
 * project you run leaseq in (nearest package.json at or above the working directory) when leaseq is an
 * installed package, so its state survives a reinstall and every command of the project finds it.
 */
export function defaultProjectDir(): string {
  const own = fileURLToPath(new URL('../../', import.meta.url));
  if (!own.split(sep).includes('node_modules')) return own;
  for (let dir = resolve(process.cwd()); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && !dir.split(sep).includes('node_modules')) return dir;
    if (dirname(dir) === dir) return process.cwd();
  }
}

/** `LEASEQ_STATE_DIR`, else `<project>/.leaseq`. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.LEASEQ_STATE_DIR?.trim() || join(defaultProjectDir(), '.leaseq');
}

/** A new credential: 20-character key id (`LSQ` + 17), 40-character secret, as AWS's are shaped. */
export function newLocalCredential(): LocalCredential {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const id = [...randomBytes(17)].map((b) => alphabet[b % 32]).join('');
  return { accessKeyId: `LSQ${id}`, secretAccessKey: randomBytes(30).toString('base64url') };
}

/** Writes the credential owner-only (a sibling renamed over it, so a reader never sees half of it). */
export function writeLocalCredential(stateDir: string, credential: LocalCredential, port: number): void {
  const file = join(stateDir, CREDENTIAL_FILE);
  const tmp = `${file}.${process.pid}.tmp`;
  rmSync(tmp, { force: true });
  const stored: StoredCredential = { ...credential, port };
  writeFileSync(tmp, `${JSON.stringify(stored)}\n`, { mode: 0o600, flag: 'wx' });
  renameSync(tmp, file);
}

/**
 * The credential in `stateDir`, or `undefined` when there is none, or when the file is not the
 * operator's own and private (one another user planted is never used).
 */
export function readLocalCredential(stateDir: string): StoredCredential | undefined {
  let fd: number;
  try {
    fd = openSync(join(stateDir, CREDENTIAL_FILE), 'r');
  } catch {
    return undefined;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || (stat.mode & 0o077) !== 0) return undefined;
    if (process.getuid && stat.uid !== process.getuid()) return undefined;
    const parsed = JSON.parse(readFileSync(fd, 'utf8')) as Partial<StoredCredential>;
    const { accessKeyId, secretAccessKey, port } = parsed;
    if (typeof accessKeyId !== 'string' || typeof secretAccessKey !== 'string' || typeof port !== 'number') {
      return undefined;
    }
    return { accessKeyId, secretAccessKey, port };
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** How long a client keeps the credential it read before reading the file again (a restart makes another). */
const REREAD_MS = 1000;
/** The SDK refreshes an identity 5 minutes before it expires: expiring 5 min + REREAD_MS out keeps it REREAD_MS. */
const SDK_REFRESH_WINDOW_MS = 300_000;

function portOf(endpoint: string): number | undefined {
  try {
    const url = new URL(endpoint);
    return Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  } catch {
    return undefined;
  }
}

/**
 * The embedded emulator's credential when `endpoint` (a loopback one) is that emulator: the state
 * directory holds a credential for its port. A proxy in front of it, or another emulator, gets none.
 */
export function ownCredentialFor(
  endpoint: string,
  env: NodeJS.ProcessEnv = process.env,
): LocalCredential | undefined {
  const own = readLocalCredential(defaultStateDir(env));
  if (!own || own.port !== portOf(endpoint)) return undefined;
  return { accessKeyId: own.accessKeyId, secretAccessKey: own.secretAccessKey };
}

/**
 * The credential provider of clients for a loopback endpoint: the embedded emulator's credential when
 * the endpoint is that emulator (`ownCredentialFor`); else the environment's keys (a function the
 * emulator runs, a shell that ran `leaseq local env`); else `test`/`test`, which other local emulators
 * (LocalStack, moto) accept.
 */
export function localCredentialProvider(endpoint: string, env: NodeJS.ProcessEnv = process.env) {
  return async () => {
    const own = ownCredentialFor(endpoint, env);
    const expiration = new Date(Date.now() + SDK_REFRESH_WINDOW_MS + REREAD_MS);
    if (own) return { ...own, expiration };
    if (env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY) {
      return {
        accessKeyId: env.AWS_ACCESS_KEY_ID,
        secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
        ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
        expiration,
      };
    }
    return { ...ANY_CREDENTIAL, expiration };
  };
}
