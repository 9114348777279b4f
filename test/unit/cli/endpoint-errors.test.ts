import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
// A web server that answers, but not like SQS: what a wrong port usually is.
const server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<html><body>hello</body></html>');
});
let port = 0;

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  port = typeof address === 'object' && address ? address.port : 0;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

async function statusAgainst(endpoint: string): Promise<{ code: number; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, AWS_ENDPOINT_URL: '' };
  // Without credentials, as on a new machine: the name must be the problem reported, not credentials.
  delete env.AWS_ACCESS_KEY_ID;
  delete env.AWS_SECRET_ACCESS_KEY;
  delete env.AWS_PROFILE;
  return run(process.execPath, ['bin/leaseq.mjs', 'status', '--endpoint', endpoint], {
    env,
    timeout: 60_000,
  }).then(
    () => ({ code: 0, stderr: '' }),
    (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
  );
}

describe('CLI against a wrong endpoint', () => {
  it('names a host that does not resolve', async () => {
    const { code, stderr } = await statusAgainst('http://nonexistent.invalid:4566');
    expect(code).toBe(1);
    expect(stderr).toBe(
      'leaseq: cannot reach http://nonexistent.invalid:4566: the host nonexistent.invalid does not resolve; check --endpoint or AWS_ENDPOINT_URL\n',
    );
  });

  it('says a server that answers is not SQS', async () => {
    const { code, stderr } = await statusAgainst(`http://127.0.0.1:${port}`);
    expect(code).toBe(1);
    expect(stderr.split('\n').filter(Boolean)).toHaveLength(1);
    expect(stderr).toMatch(
      new RegExp(
        `^leaseq: http://127\\.0\\.0\\.1:${port} answered, but not like SQS \\(HTTP 200\\); is it the right port\\?`,
      ),
    );
    expect(stderr).not.toMatch(/\$response|Unexpected token/);
  });
});
