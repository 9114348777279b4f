/**
 * The environment the embedded emulator runs with. Its Lambda executor hands its own environment to
 * every function it runs (MiniStack 1.5.33 builds a function's environment as `{**os.environ, ...}`), and
 * a function is code anyone who reaches the emulator can deploy. So the emulator gets an allow-list of
 * the operator's variables, never `process.env`: no AWS profile, key, token or any other secret.
 */
import { delimiter, dirname } from 'node:path';
import type { LocalCredential } from '../aws/local-credential.ts';

/**
 * Variables passed through from the operator's environment, by exact name. Paths, locale and time
 * zone, which Python and Node need to run, and the AWS region settings and the SDK's Node version
 * notice, which are neither credentials nor a profile.
 */
const PASSED = [
  'HOME',
  'TMPDIR',
  'LANG',
  'LANGUAGE',
  'TZ',
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
  'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED',
] as const;

/** Locale categories (`LC_ALL`, `LC_CTYPE`, ...) pass by prefix. */
const PASSED_PREFIX = 'LC_';

/**
 * The emulator's whole environment: the allow-listed variables of `parent`, the credential of this
 * start (as `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`: the guard checks signatures with it, and the
 * functions the emulator runs get it from there, so they sign with it and never see a real key), the
 * emulator's own settings (`settings`, which win), and PATH with the directory of `nodeBinary` first,
 * because the emulator runs deployed Node functions with the `node` on its PATH (the caller passes the
 * project's Node dev dependency, `function-node.ts`, not whatever the system PATH finds first).
 */
export function emulatorEnv(
  parent: NodeJS.ProcessEnv,
  settings: Readonly<Record<string, string>>,
  credential: LocalCredential,
  nodeBinary: string = process.execPath,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(parent)) {
    if (value === undefined) continue;
    if ((PASSED as readonly string[]).includes(name) || name.startsWith(PASSED_PREFIX)) env[name] = value;
  }
  return {
    ...env,
    AWS_ACCESS_KEY_ID: credential.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credential.secretAccessKey,
    ...settings,
    PATH: [dirname(nodeBinary), parent.PATH ?? ''].filter(Boolean).join(delimiter),
    PYTHONUNBUFFERED: '1',
  };
}
