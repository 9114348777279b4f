import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EmulatorHandle, ensureEmulator, stopEmulator } from '../../../shared/local/emulator.ts';
import { LOOPBACK_HOST } from '../../../shared/local/net.ts';
import { freePort } from '../../support/free-port.ts';
import { captureSigned } from '../../support/signed-request.ts';

// Whoever cannot sign (another local user) cannot make the emulator hold what they send: the guard
// refuses an unsigned request, or one whose signature does not match, without reading its body into
// memory first. Before, a 1 GiB unsigned POST from uid 65534 took the emulator to over 2 GB resident.
// The one unsigned request it serves, the CloudFormation response PUT, is that exact path only; a
// request with two Authorization headers is refused (the guard and MiniStack could read different ones).

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const stateDir = mkdtempSync(join(tmpdir(), 'leaseq-body-'));
const installedVenv = [
  join(ROOT, '.leaseq', 'venv'),
  join(dirname(realpathSync(join(ROOT, 'node_modules'))), '.leaseq', 'venv'),
].find((dir) => existsSync(join(dir, 'bin', 'ministack')));
const GIB = 1024 * 1024 * 1024;
let handle: EmulatorHandle;
let port = 0;

/** The emulator's resident size now, in bytes (Linux's VmRSS). */
function resident(): number {
  const status = readFileSync(`/proc/${handle.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/** How much the emulator's resident size grew at most while `work` ran (sampled every 20 ms). */
async function growthDuring<T>(work: () => Promise<T>): Promise<{ out: T; growth: number }> {
  const base = resident();
  let peak = base;
  const timer = setInterval(() => {
    peak = Math.max(peak, resident());
  }, 20);
  try {
    const out = await work();
    return { out, growth: Math.max(peak, resident()) - base };
  } finally {
    clearInterval(timer);
  }
}

/** POSTs `size` bytes with `headers`, stopping when the emulator answers; the status and bytes sent. */
function flood(size: number, headers: Record<string, string>): Promise<{ status: string; sent: number }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, LOOPBACK_HOST);
    const chunk = Buffer.alloc(1024 * 1024, 97);
    let sent = 0;
    let answer = '';
    // Refused at once, the connection may be reset while the body is still being sent, answer unread.
    const done = () => resolve({ status: answer.split('\r\n')[0] || `reset after ${sent} bytes`, sent });
    socket.on('data', (data) => {
      answer += data.toString('latin1');
      if (answer.includes('\r\n\r\n')) socket.destroy();
    });
    socket.on('close', done);
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE' || error.code === 'ECONNRESET') done();
      else reject(error);
    });
    const head = Object.entries({
      Host: `${LOOPBACK_HOST}:${port}`,
      'Content-Length': String(size),
      'Content-Type': 'application/x-www-form-urlencoded',
      ...headers,
    })
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.write(`POST / HTTP/1.1\r\n${head}\r\n`);
    const pump = () => {
      while (sent < size && !socket.destroyed && !answer) {
        sent += chunk.length;
        if (!socket.write(chunk)) return void socket.once('drain', pump);
      }
    };
    pump();
  });
}

beforeAll(async () => {
  if (installedVenv) symlinkSync(installedVenv, join(stateDir, 'venv'));
  port = await freePort();
  handle = await ensureEmulator({ stateDir, port, env: { ...process.env, AWS_ENDPOINT_URL: '' } });
}, 180_000);

afterAll(async () => {
  await stopEmulator({ stateDir, env: {}, graceMs: 5000 });
  rmSync(stateDir, { recursive: true, force: true });
});

describe('the emulator guard does not hold the body of a request it refuses', () => {
  it('refuses a 1 GiB unsigned POST before reading it', async () => {
    const { out, growth } = await growthDuring(() => flood(GIB, {}));
    expect(out.status).toMatch(/^HTTP\/1\.1 403|^reset/);
    expect(growth, `resident size grew while ${out.sent} bytes were sent`).toBeLessThan(200 * 1024 * 1024);
  }, 120_000);

  it('refuses a 1 GiB POST whose signature is made up, before holding it', async () => {
    const date = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '');
    const { out, growth } = await growthDuring(() =>
      flood(GIB, {
        'X-Amz-Date': date,
        Authorization:
          `AWS4-HMAC-SHA256 Credential=000000000000/${date.slice(0, 8)}/us-east-1/sqs/aws4_request, ` +
          `SignedHeaders=host;x-amz-date, Signature=${'0'.repeat(64)}`,
      }),
    );
    expect(out.status).toMatch(/^HTTP\/1\.1 (403|413)|^reset/);
    expect(growth, `resident size grew while ${out.sent} bytes were sent`).toBeLessThan(200 * 1024 * 1024);
  }, 120_000);

  it('refuses a 1 GiB S3 PUT whose signature over a declared hash is made up, before reading it', async () => {
    const date = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '');
    const { out, growth } = await growthDuring(() =>
      flood(GIB, {
        'X-Amz-Date': date,
        'X-Amz-Content-Sha256': 'UNSIGNED-PAYLOAD',
        Authorization:
          `AWS4-HMAC-SHA256 Credential=000000000000/${date.slice(0, 8)}/us-east-1/s3/aws4_request, ` +
          `SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=${'0'.repeat(64)}`,
      }),
    );
    expect(out.status).toMatch(/^HTTP\/1\.1 403|^reset/);
    expect(growth, `resident size grew while ${out.sent} bytes were sent`).toBeLessThan(200 * 1024 * 1024);
  }, 120_000);
});

describe('the unsigned CloudFormation response PUT is that and nothing more', () => {
  /** An unsigned PUT of `path`, as another local user could send it; its status. */
  const put = (path: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const socket = connect(port, LOOPBACK_HOST);
      let answer = '';
      socket.on('data', (data) => {
        answer += data.toString('latin1');
      });
      socket.on('close', () => resolve(Number(answer.split(' ')[1] ?? 0)));
      socket.on('error', reject);
      socket.end(
        `PUT ${path} HTTP/1.1\r\nHost: ${LOOPBACK_HOST}:${port}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
      );
    });
  const token = '0123abcd-0123-0123-0123-0123456789ab';

  it('is served for a random token, and refused for a path that only begins with one', async () => {
    expect(await put(`/_ministack/cfn-response/${token}`)).toBe(200);
    expect(await put(`/_ministack/cfn-response/${token}%0A`), 'a token and a newline').toBe(403);
    expect(await put(`/_ministack/cfn-response/${token}x`)).toBe(403);
    expect(await put(`/_ministack/cfn-response/../../${token}`)).toBe(403);
  });
});

describe('a request with two Authorization headers', () => {
  it('is refused, though one of them is the signature of this start', async () => {
    const credentials = (handle as { credentials?: { accessKeyId: string; secretAccessKey: string } })
      .credentials ?? { accessKeyId: 'test', secretAccessKey: 'test' };
    const client = new SQSClient({ endpoint: handle.endpoint, region: 'us-east-1', credentials });
    const signed = await captureSigned(client, new ListQueuesCommand({})).finally(() => client.destroy());
    const send = (extra: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = connect(port, LOOPBACK_HOST);
        let answer = '';
        socket.on('data', (data) => {
          answer += data.toString('latin1');
        });
        socket.on('close', () => resolve(answer.split('\r\n')[0] ?? ''));
        socket.on('error', reject);
        const head = Object.entries({ ...signed.headers, connection: 'close' })
          .filter(([name]) => name.toLowerCase() !== 'authorization')
          .map(([name, value]) => `${name}: ${value}\r\n`)
          .join('');
        const own = `authorization: ${signed.headers.authorization}\r\n`;
        socket.end(`POST / HTTP/1.1\r\n${head}${extra}${own}\r\n${signed.payload}`);
      });
    const date = signed.headers['x-amz-date']?.slice(0, 8);
    const other = `authorization: AWS4-HMAC-SHA256 Credential=000000000000/${date}/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=${'0'.repeat(64)}\r\n`;

    expect(await send('')).toMatch(/^HTTP\/1\.1 200/);
    expect(await send(other), 'another Authorization before the signed one').toMatch(/^HTTP\/1\.1 403/);
  });
});
