import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EMULATORS } from '../../../shared/local/emulators.ts';
import { markInstalled, venvExecutable } from '../../../shared/local/venv.ts';

/** How the fake emulator behaves once started. */
export type FakeMode = 'serve' | 'exit' | 'silent' | 'ignore-term';

const scripts: Record<FakeMode, string> = {
  // Answers every request with `{}`: enough for ListTables and ListQueues over the JSON protocols.
  serve: `
const http = require('node:http');
http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
    res.end('{}');
  });
}).listen(Number(process.env.GATEWAY_PORT), process.env.BIND_HOST);
process.on('SIGTERM', () => process.exit(0));
`,
  exit: `process.stderr.write('fake emulator: cannot start\\n'); process.exit(3);`,
  silent: `setInterval(() => {}, 1000);`,
  'ignore-term': `
const http = require('node:http');
http.createServer((req, res) => { req.resume(); req.on('end', () => res.end('{}')); })
  .listen(Number(process.env.GATEWAY_PORT), process.env.BIND_HOST);
process.on('SIGTERM', () => {});
`,
};

/**
 * A state directory whose virtualenv already "holds" the default emulator: its executable, and the
 * virtualenv's `python` that runs leaseq's guard launcher, are a small Node script (which ignores the
 * launcher), so the manager's start / reuse / stop logic runs for real without Python or PyPI.
 */
export function fakeInstall(mode: FakeMode): { stateDir: string; remove: () => void } {
  const stateDir = mkdtempSync(join(tmpdir(), 'leaseq-unit-'));
  const venvDir = join(stateDir, 'venv');
  const spec = EMULATORS.ministack;
  const executable = venvExecutable(venvDir, spec.executable);
  mkdirSync(join(venvDir, 'bin'), { recursive: true });
  for (const file of [executable, venvExecutable(venvDir, 'python')]) {
    writeFileSync(file, `#!/usr/bin/env node\n${scripts[mode]}\n`);
    chmodSync(file, 0o755);
  }
  markInstalled(spec, venvDir);
  return { stateDir, remove: () => rmSync(stateDir, { recursive: true, force: true }) };
}

/** An empty temporary directory. */
export function tempDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'leaseq-unit-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Writes an executable shell script. */
export function writeScript(path: string, body: string): string {
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

export { freePort } from '../../support/free-port.ts';

export function listen(port: number, host = '127.0.0.1'): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => socket.destroy());
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

export function portOf(server: Server): number {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('server has no port');
  return address.port;
}

export function close(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
