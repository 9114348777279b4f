import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateFunctionCommand, InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { zipSync } from 'fflate';
import { afterAll, describe, expect, it } from 'vitest';
import { readLocalCredential } from '../../../shared/aws/local-credential.ts';
import { stopEmulator } from '../../../shared/local/emulator.ts';
import { endpointFor } from '../../../shared/local/emulator-config.ts';
import { readEmulatorState } from '../../../shared/local/state.ts';
import { freePort } from '../../support/free-port.ts';

// A function declaring nodejs22.x runs on Node 22 on the embedded emulator even when leaseq itself runs
// on another Node (the system's, first on a user's PATH): MiniStack starts every Node function with the
// `node` first on its own PATH, and leaseq puts the project's Node dev dependency there.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'leaseq.mjs');
const installedVenv = [
  join(ROOT, '.leaseq', 'venv'),
  join(dirname(realpathSync(join(ROOT, 'node_modules'))), '.leaseq', 'venv'),
].find((dir) => existsSync(join(dir, 'bin', 'ministack')));

/** A Node on the system PATH whose major is not the project's (22): what leaseq may be run with. */
const otherNode = ['/usr/bin/node', '/usr/local/bin/node', '/bin/node'].find((bin) => {
  if (!existsSync(bin)) return false;
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim();
  return /^v\d+\./.test(version) && !version.startsWith('v22.');
});

const stateDir = mkdtempSync(join(tmpdir(), 'leaseq-fnode-'));

afterAll(async () => {
  await stopEmulator({ stateDir, env: {}, graceMs: 5000 });
  rmSync(stateDir, { recursive: true, force: true });
}, 30_000);

describe('the embedded emulator runs Node functions on the project Node', () => {
  // Without another Node on the system, leaseq runs on this one (the check then holds either way).
  it('a nodejs22.x function reports process.version 22 when leaseq runs on another Node', async () => {
    if (installedVenv) symlinkSync(installedVenv, join(stateDir, 'venv'));
    const port = await freePort();
    const env = { ...process.env, LEASEQ_STATE_DIR: stateDir, AWS_ENDPOINT_URL: '' };
    execFileSync(
      otherNode ?? process.execPath,
      [BIN, 'local', 'up', '--all-services', '--port', String(port)],
      {
        cwd: ROOT,
        env,
        stdio: 'pipe',
        timeout: 120_000,
      },
    );
    // The record says which Node it runs functions on: what local deploy compares runtimes with.
    expect(readEmulatorState(join(stateDir, 'emulator.json'))?.node?.version).toMatch(/^v22\./);
    const credential = readLocalCredential(stateDir);
    expect(credential).toBeDefined();
    const lambda = new LambdaClient({
      endpoint: endpointFor(port),
      region: 'us-east-1',
      credentials: credential,
    });
    try {
      const zip = zipSync({
        'index.mjs': new TextEncoder().encode(
          'export const handler = async () => ({ version: process.version });\n',
        ),
      });
      await lambda.send(
        new CreateFunctionCommand({
          FunctionName: 'node-version',
          Runtime: 'nodejs22.x',
          Handler: 'index.handler',
          Role: 'arn:aws:iam::000000000000:role/any',
          Code: { ZipFile: zip },
        }),
      );
      const out = await lambda.send(new InvokeCommand({ FunctionName: 'node-version' }));
      const body = JSON.parse(new TextDecoder().decode(out.Payload)) as { version?: string };
      expect(out.FunctionError, JSON.stringify(body)).toBeUndefined();
      expect(body.version).toMatch(/^v22\./);
    } finally {
      lambda.destroy();
    }
  }, 180_000);
});
