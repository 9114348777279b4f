import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateFunctionCommand, InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { CreateQueueCommand, ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  acquireEmulator,
  type EmulatorHandle,
  ensureEmulator,
  stopEmulator,
} from '../../../shared/local/emulator.ts';
import { EmulatorError } from '../../../shared/local/emulator-errors.ts';
import { LOOPBACK_HOST } from '../../../shared/local/net.ts';
import { isProcessAlive } from '../../../shared/local/process.ts';
import { freePort } from '../../support/free-port.ts';
import { captureSigned } from '../../support/signed-request.ts';

// The embedded emulator is reachable only by leaseq and the user's own tools: started exactly as
// `leaseq local up` starts it (ensureEmulator, on a free port, in a state directory of its own), it
// refuses what a web page can send (an Origin header, a rebound Host), serves the SDK, and neither it
// nor a function deployed to it sees the operator's shell variables.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const stateDir = mkdtempSync(join(tmpdir(), 'leaseq-guard-'));
/** What the operator's shell exports: none of it may reach the emulator or its functions. */
const shell = {
  LEASEQ_TEST_SECRET_PROBE: 'x',
  AWS_SECRET_ACCESS_KEY: 'real-secret',
  AWS_SESSION_TOKEN: 'real-session-token',
  AWS_PROFILE: 'production',
};
/**
 * The installed emulator: this checkout's, or that of the checkout whose node_modules this one links
 * (a git worktree). Without either, `ensureEmulator` installs one into the test's state directory.
 */
const installedVenv = [
  join(ROOT, '.leaseq', 'venv'),
  join(dirname(realpathSync(join(ROOT, 'node_modules'))), '.leaseq', 'venv'),
].find((dir) => existsSync(join(dir, 'bin', 'ministack')));
/** This process's values of the `shell` variables before the test set them. */
const saved = new Map<string, string | undefined>();
let handle: EmulatorHandle;
let port = 0;

/** The credential of the emulator's start: the only one it serves. */
function credentials(): { accessKeyId: string; secretAccessKey: string } {
  if (!handle.credentials) throw new Error('the emulator handle carries no credential');
  return handle.credentials;
}

/** SQS ListQueues over the JSON protocol, signed with the emulator's credential for `host`. */
async function signedListQueues(host: string, withoutLength = false): Promise<Record<string, string>> {
  const client = new SQSClient({
    endpoint: `http://${host}`,
    region: 'us-east-1',
    credentials: credentials(),
  });
  try {
    return (await captureSigned(client, new ListQueuesCommand({}), withoutLength)).headers;
  } finally {
    client.destroy();
  }
}

interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** One request with exactly these headers (node:http sets no Origin; `host` here overrides its own). */
function raw(method: string, headers: Record<string, string>, body = ''): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: LOOPBACK_HOST, port, method, path: '/', headers, agent: false, timeout: 10_000 },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.once('error', reject);
    req.once('timeout', () => req.destroy(new Error('no answer within 10 s')));
    req.end(body);
  });
}

/** SQS ListQueues over the JSON protocol, with a made-up signature (what a web page could send). */
const listQueues = {
  'content-type': 'application/x-amz-json-1.0',
  'x-amz-target': 'AmazonSQS.ListQueues',
  authorization: 'AWS4-HMAC-SHA256 Credential=bogus/20260101/us-east-1/sqs/aws4_request, Signature=00',
};

/** A zip holding `index.mjs` with `source`, made by the emulator's own Python (no zip tool needed). */
function zipOf(source: string): Uint8Array {
  const python = join(stateDir, 'venv', 'bin', 'python');
  return execFileSync(python, [
    '-c',
    [
      'import io, sys, zipfile',
      'buf = io.BytesIO()',
      'with zipfile.ZipFile(buf, "w") as z: z.writestr("index.mjs", sys.argv[1])',
      'sys.stdout.buffer.write(buf.getvalue())',
    ].join('\n'),
    source,
  ]);
}

/** Invokes the function, retrying while it is still being created (Pending). */
async function invokeOnceActive(lambda: LambdaClient, name: string) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return await lambda.send(new InvokeCommand({ FunctionName: name }));
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

beforeAll(async () => {
  // The installed emulator, shared by symlink: the state (record, log, launcher) is this test's own.
  if (installedVenv) symlinkSync(installedVenv, join(stateDir, 'venv'));
  mkdirSync(join(stateDir, 'tmp'));
  port = await freePort();
  // Exported in the shell that runs `leaseq local up`: in this process's environment, which is what
  // the manager reads by default (and what it handed on whole before).
  for (const [name, value] of Object.entries(shell)) {
    saved.set(name, process.env[name]);
    process.env[name] = value;
  }
  // AWS_ENDPOINT_URL (the shared test emulator) unset, so the manager starts one.
  handle = await ensureEmulator({
    stateDir,
    port,
    env: { ...process.env, AWS_ENDPOINT_URL: '', TMPDIR: join(stateDir, 'tmp') },
  });
}, 180_000);

afterAll(async () => {
  for (const [name, value] of saved) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  await stopEmulator({ stateDir, env: {}, graceMs: 5000 });
  rmSync(stateDir, { recursive: true, force: true });
});

describe('the embedded emulator, started as `leaseq local up` starts it', () => {
  it('refuses a CORS preflight and a POST from a web page (Origin header)', async () => {
    const preflight = await raw('OPTIONS', {
      host: `${LOOPBACK_HOST}:${port}`,
      origin: 'https://evil.example',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type,x-amz-target,authorization',
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    expect(preflight.body).toMatch(/^refused by leaseq's emulator guard: .*Origin/);
    expect(preflight.body.trimEnd().split('\n')).toHaveLength(1);

    const post = await raw(
      'POST',
      { ...listQueues, host: `${LOOPBACK_HOST}:${port}`, origin: 'https://evil.example' },
      '{}',
    );
    expect(post.status).toBe(403);
    expect(post.headers['access-control-allow-origin']).toBeUndefined();
    expect(post.body).not.toContain('QueueUrls');
  });

  it('refuses a cross-site browser request that carries no Origin (Sec-Fetch-Site)', async () => {
    const get = await raw('GET', { host: `${LOOPBACK_HOST}:${port}`, 'sec-fetch-site': 'cross-site' });
    expect(get.status).toBe(403);
    expect(get.body).toMatch(/^refused by leaseq's emulator guard: .*Sec-Fetch-Site/);
  });

  it('refuses a request whose Host is not its loopback address (DNS rebinding)', async () => {
    const rebound = await raw('POST', { ...listQueues, host: `evil.example:${port}` }, '{}');
    expect(rebound.status).toBe(403);
    expect(rebound.body).toContain(`Host 'evil.example:${port}' is not this emulator's loopback address`);

    const lookalike = await raw('POST', { ...listQueues, host: `localhost.evil.example:${port}` }, '{}');
    expect(lookalike.status).toBe(403);
    // A loopback name on another port is a local TCP proxy in front (Toxiproxy in the fault tests): served.
    const proxyHost = `${LOOPBACK_HOST}:${port + 1}`;
    const proxied = await raw('POST', await signedListQueues(proxyHost), '{}');
    expect(proxied.status, proxied.body).toBe(200);
  });

  it('serves the same request from a local tool, and the SDK', async () => {
    for (const host of [`${LOOPBACK_HOST}:${port}`, `localhost:${port}`]) {
      const local = await raw('POST', await signedListQueues(host), '{}');
      expect(local.status, host).toBe(200);
    }
    const signed = await signedListQueues(`${LOOPBACK_HOST}:${port}`, true);
    const chunked = await raw('POST', { ...signed, 'transfer-encoding': 'chunked' }, '{}');
    expect(chunked.status).toBe(200);
    expect(chunked.body).toContain('QueueUrls');

    const sqs = new SQSClient({ endpoint: handle.endpoint, region: 'us-east-1', credentials: credentials() });
    try {
      const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: 'guard-probe' }));
      expect(QueueUrl).toBe(`http://${LOOPBACK_HOST}:${port}/000000000000/guard-probe`);
      const { QueueUrls } = await sqs.send(new ListQueuesCommand({}));
      expect(QueueUrls).toContain(QueueUrl);
    } finally {
      sqs.destroy();
    }
  });

  it("runs with none of the operator shell variables, and with its start's credential only", () => {
    const environ = readFileSync(`/proc/${handle.pid}/environ`, 'utf8').split('\0');
    const env = Object.fromEntries(environ.filter(Boolean).map((kv) => kv.split(/=(.*)/s, 2)));
    expect(env).not.toHaveProperty('LEASEQ_TEST_SECRET_PROBE');
    expect(env).not.toHaveProperty('AWS_SESSION_TOKEN');
    expect(env).not.toHaveProperty('AWS_PROFILE');
    expect(env.AWS_SECRET_ACCESS_KEY).toBe(credentials().secretAccessKey);
    expect(env.AWS_SECRET_ACCESS_KEY).not.toBe(shell.AWS_SECRET_ACCESS_KEY);
  });

  it('writes its log owner-only', () => {
    expect((statSync(join(stateDir, 'emulator.log')).mode & 0o777).toString(8)).toBe('600');
  });

  it('serves queues and tables only, as `local up` starts it: nothing can run code through it', async () => {
    expect(handle.services).toBe('queues-and-tables');
    const lambda = new LambdaClient({
      endpoint: handle.endpoint,
      region: 'us-east-1',
      credentials: credentials(),
    });
    try {
      const refused = await lambda
        .send(
          new CreateFunctionCommand({
            FunctionName: 'guard-refused',
            Runtime: 'nodejs22.x',
            Handler: 'index.handler',
            Role: 'arn:aws:iam::000000000000:role/guard-refused',
            Code: { ZipFile: zipOf('export const handler = async () => 1;') },
          }),
        )
        .catch((e: Error) => e);
      expect(refused).toBeInstanceOf(Error);
      expect(JSON.stringify(refused)).toMatch(/Unsupported service: lambda/);
    } finally {
      lambda.destroy();
    }
  });

  it('restarts with every service for a deploy, but never under a test session holding it', async () => {
    const env = { ...process.env, AWS_ENDPOINT_URL: '', TMPDIR: join(stateDir, 'tmp') };
    const session = await acquireEmulator({ stateDir, port, env });
    const held = await ensureEmulator({ stateDir, port, env, services: 'all' }).catch((e: Error) => e);
    expect(held).toBeInstanceOf(EmulatorError);
    expect((held as Error).message).toMatch(
      /serves queues and tables only, and 1 leaseq process is using it; .*`leaseq local up --all-services`$/,
    );
    await session.release();
    expect(isProcessAlive(handle.pid ?? 0)).toBe(true);

    const before = handle.pid;
    // No port given: the restart keeps the emulator's own port (not the default 4566).
    const unported: NodeJS.ProcessEnv = { ...env };
    delete unported.LEASEQ_EMULATOR_PORT;
    handle = await ensureEmulator({ stateDir, env: unported, services: 'all' });
    // A person's emulator (`local up`) stays theirs: restarted, not started by this call.
    expect(handle).toMatchObject({ restarted: true, started: false, services: 'all', port });
    expect(handle.pid).not.toBe(before);
    expect(isProcessAlive(before ?? 0)).toBe(false);
  });

  it('runs a deployed function that cannot see a variable set in the operator shell', async () => {
    const lambda = new LambdaClient({
      endpoint: handle.endpoint,
      region: 'us-east-1',
      credentials: credentials(),
    });
    try {
      await lambda.send(
        new CreateFunctionCommand({
          FunctionName: 'guard-env-probe',
          Runtime: 'nodejs22.x',
          Handler: 'index.handler',
          Role: 'arn:aws:iam::000000000000:role/guard-env-probe',
          Code: {
            ZipFile: zipOf(
              'export const handler = async () => ({ probe: process.env.LEASEQ_TEST_SECRET_PROBE || null, secret: process.env.AWS_SECRET_ACCESS_KEY || null, token: process.env.AWS_SESSION_TOKEN || null, profile: process.env.AWS_PROFILE || null });',
            ),
          },
        }),
      );
      const out = await invokeOnceActive(lambda, 'guard-env-probe');
      expect(out.FunctionError, new TextDecoder().decode(out.Payload)).toBeUndefined();
      expect(JSON.parse(new TextDecoder().decode(out.Payload))).toEqual({
        probe: null,
        secret: credentials().secretAccessKey,
        token: null,
        profile: null,
      });
    } finally {
      lambda.destroy();
    }
  });

  it('leaves no folder of its function processes behind when stopped (local down)', async () => {
    // Prepare: the function of the test above runs in a folder the emulator unpacked it into.
    const folders = () =>
      readdirSync(join(stateDir, 'tmp')).filter((f) => f.startsWith('ministack-lambda-guard-env-probe-'));
    expect(folders().length).toBeGreaterThan(0);

    // Act
    const stopped = await stopEmulator({ stateDir, env: {}, graceMs: 5000 });

    // Assess
    expect(stopped.stopped).toBe(true);
    expect(folders()).toEqual([]);
  });
});
