import { execFile } from 'node:child_process';
import { createServer, type Socket } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const sockets: Socket[] = [];
// An endpoint that accepts connections and never answers: the case where only a request timeout helps.
const server = createServer((socket) => sockets.push(socket));
let port = 0;

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  port = typeof address === 'object' && address ? address.port : 0;
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => server.close(resolve));
});

describe('CLI against an endpoint that never answers', () => {
  it('fails with one line within seconds instead of hanging', async () => {
    const started = Date.now();
    const error = await run(
      process.execPath,
      ['bin/leaseq.mjs', 'status', '--endpoint', `http://127.0.0.1:${port}`],
      {
        env: { ...process.env, AWS_ENDPOINT_URL: '' },
        timeout: 60_000,
      },
    ).catch((e: { code: number; stderr: string; killed?: boolean }) => e);
    const elapsed = Date.now() - started;
    expect(error).toMatchObject({ code: 1 });
    const stderr = (error as { stderr: string }).stderr.trim();
    expect(stderr.split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/^leaseq: cannot reach http:\/\/127\.0\.0\.1:\d+ .*requestTimeout/);
    // Two attempts of 5 s each, far below the 60 s the harness would kill it at.
    expect(elapsed).toBeLessThan(30_000);
  });
});
