import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EmulatorHandle, ensureEmulator, stopEmulator } from '../../../shared/local/emulator.ts';
import { LOOPBACK_HOST } from '../../../shared/local/net.ts';
import { freePort } from '../../support/free-port.ts';
import { captureSigned } from '../../support/signed-request.ts';

// Nobody but the operator drives the embedded emulator: started as `leaseq local up` starts it (its own
// state directory and port), it serves only requests signed with the credential of this start, which
// only the operator can read. An unsigned request (what a link, a redirect or another user sends), one
// signed with another key, and one altered after signing are refused and change nothing.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'leaseq.mjs');
const stateDir = mkdtempSync(join(tmpdir(), 'leaseq-auth-'));
const installedVenv = [
  join(ROOT, '.leaseq', 'venv'),
  join(dirname(realpathSync(join(ROOT, 'node_modules'))), '.leaseq', 'venv'),
].find((dir) => existsSync(join(dir, 'bin', 'ministack')));
/** What another local user knows: the test keys every emulator used to take. */
const guessed = { accessKeyId: 'test', secretAccessKey: 'test' };
const asRoot = process.getuid?.() === 0;

let handle: EmulatorHandle;
let port = 0;
let sqs: SQSClient;
let queueUrl = '';

/** The credential of this start (the test keys before the emulator had one). */
function own(): { accessKeyId: string; secretAccessKey: string } {
  return (
    (handle as { credentials?: { accessKeyId: string; secretAccessKey: string } }).credentials ?? guessed
  );
}

async function messagesInQueue(): Promise<number> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) +
    Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}

/** The query API's SendMessage, as a link or a form carries it (no signature). */
function sendMessageQuery(body: string): string {
  return new URLSearchParams({
    Action: 'SendMessage',
    Version: '2012-11-05',
    QueueUrl: queueUrl,
    MessageBody: body,
  }).toString();
}

function raw(
  method: string,
  path: string,
  headers: Record<string, string>,
  body = '',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: LOOPBACK_HOST, port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.once('error', reject);
    req.end(body);
  });
}

/** An SQS SendMessage as the SDK signs it with `credentials`, to send by hand: as signed, or altered. */
async function signedSend(credentials: { accessKeyId: string; secretAccessKey: string }, body: string) {
  const client = new SQSClient({
    endpoint: handle.endpoint,
    region: 'us-east-1',
    credentials,
    maxAttempts: 1,
  });
  try {
    return await captureSigned(client, new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body }));
  } finally {
    client.destroy();
  }
}

beforeAll(async () => {
  if (installedVenv) symlinkSync(installedVenv, join(stateDir, 'venv'));
  port = await freePort();
  handle = await ensureEmulator({ stateDir, port, env: { ...process.env, AWS_ENDPOINT_URL: '' } });
  sqs = new SQSClient({ endpoint: handle.endpoint, region: 'us-east-1', credentials: own() });
  queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'auth-probe' }))).QueueUrl ?? '';
}, 180_000);

afterAll(async () => {
  sqs?.destroy();
  await stopEmulator({ stateDir, env: {}, graceMs: 5000 });
  rmSync(stateDir, { recursive: true, force: true });
});

describe('the embedded emulator serves only requests signed with the credential of its start', () => {
  it('refuses an unsigned GET of the query API (a link) and sends nothing', async () => {
    const get = await raw('GET', `/?${sendMessageQuery('unsigned-get')}`, {
      host: `${LOOPBACK_HOST}:${port}`,
    });
    expect(await messagesInQueue(), 'messages an unsigned GET sent').toBe(0);
    expect(get.status).toBe(403);
    expect(get.body).toContain('is not signed');
  });

  it('refuses an unsigned POST (a form, curl) and sends nothing', async () => {
    const post = await raw(
      'POST',
      '/',
      { host: `${LOOPBACK_HOST}:${port}`, 'content-type': 'application/x-www-form-urlencoded' },
      sendMessageQuery('unsigned-post'),
    );
    expect(await messagesInQueue(), 'messages an unsigned POST sent').toBe(0);
    expect(post.status).toBe(403);
  });

  it('refuses a request signed with another key, and one altered after signing', async () => {
    const other = await signedSend(guessed, 'wrong-key');
    const wrong = await raw('POST', '/', other.headers, other.payload);
    expect(wrong.status).toBe(403);
    expect(wrong.body).toMatch(/UnrecognizedClientException|InvalidSignature/);

    const mine = await signedSend(own(), 'signed');
    const altered = await raw('POST', '/', mine.headers, mine.payload.replace('signed', 'SIGNED'));
    expect(altered.status).toBe(403);
    expect(await messagesInQueue()).toBe(0);

    // The same request as signed is served (the verifier follows SigV4 as the SDK's signer signs).
    const served = await raw('POST', '/', mine.headers, mine.payload);
    expect(served.status, served.body).toBe(200);
    expect(await messagesInQueue()).toBe(1);
  });

  it('gives another tool (botocore) what it needs through `leaseq local env`', () => {
    const env = { ...process.env, LEASEQ_STATE_DIR: stateDir, AWS_ENDPOINT_URL: '', AWS_PROFILE: 'prod' };
    const json = JSON.parse(
      execFileSync(process.execPath, [BIN, 'local', 'env', '--json'], { env, encoding: 'utf8' }),
    );
    expect(json).toMatchObject({
      endpoint: handle.endpoint,
      accessKeyId: own().accessKeyId,
      secretAccessKey: own().secretAccessKey,
    });

    // The documented use: eval its output in the shell that runs the tool.
    const python = join(stateDir, 'venv', 'bin', 'python');
    const script = [
      'import botocore.session',
      "sqs = botocore.session.get_session().create_client('sqs')",
      "print(sqs.get_queue_attributes(QueueUrl=sys.argv[1], AttributeNames=['QueueArn'])['Attributes']['QueueArn'])",
    ].join('; ');
    const out = execFileSync(
      'sh',
      [
        '-c',
        `eval "$("$0" "$1" local env)" && "$2" -c "import sys; ${script}" "$3"`,
        process.execPath,
        BIN,
        python,
        queueUrl,
      ],
      { env, encoding: 'utf8' },
    );
    expect(out.trim()).toBe('arn:aws:sqs:us-east-1:000000000000:auth-probe');
  });

  it('keeps the credential in an owner-only file of an owner-only directory', () => {
    expect((statSync(stateDir).mode & 0o777).toString(8)).toBe('700');
    expect((statSync(join(stateDir, 'emulator-credential.json')).mode & 0o777).toString(8)).toBe('600');
  });

  it.skipIf(!asRoot)('refuses another local user, who cannot read the credential either', () => {
    const nobody = ['--reuid=65534', '--regid=65534', '--clear-groups'];
    const read = spawnSync('setpriv', [...nobody, 'cat', join(stateDir, 'emulator-credential.json')], {
      encoding: 'utf8',
    });
    expect(read.status).not.toBe(0);
    expect(read.stderr).toMatch(/Permission denied/);

    const out = execFileSync(
      'setpriv',
      [
        ...nobody,
        'curl',
        '-s',
        '-w',
        '\n%{http_code}',
        '--aws-sigv4',
        'aws:amz:us-east-1:sqs',
        '--user',
        `${guessed.accessKeyId}:${guessed.secretAccessKey}`,
        '-H',
        'content-type: application/x-amz-json-1.0',
        '-H',
        'x-amz-target: AmazonSQS.SendMessage',
        '--data',
        JSON.stringify({ QueueUrl: queueUrl, MessageBody: 'from-another-user' }),
        `http://${LOOPBACK_HOST}:${port}/`,
      ],
      { encoding: 'utf8' },
    );
    expect(out.trim().split('\n').at(-1), `another user's signed request: ${out}`).toBe('403');
  });

  it('refuses a link the operator opens in Chromium that redirects to the query API', async () => {
    const before = await messagesInQueue();
    const evil: Server = createServer((_req, res) => {
      res.writeHead(302, {
        location: `http://${LOOPBACK_HOST}:${port}/?${sendMessageQuery('ledger.credit 1000000')}`,
      });
      res.end();
    });
    await new Promise<void>((resolve) => evil.listen(0, LOOPBACK_HOST, resolve));
    const evilPort = (evil.address() as { port: number }).port;
    const browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      // page.goto is a navigation the browser starts itself (Sec-Fetch-Site: none), as a link opened
      // from mail or a terminal is.
      const response = await page.goto(`http://${LOOPBACK_HOST}:${evilPort}/`);
      expect(response?.url()).toContain(`${LOOPBACK_HOST}:${port}/?Action=SendMessage`);
      expect(await messagesInQueue(), 'messages the opened link sent').toBe(before);
      expect(response?.status()).toBe(403);
    } finally {
      await browser.close();
      evil.close();
    }
  }, 60_000);
});

function chromiumPath(): string {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  return execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
}
