import { request } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOKEN_COOKIE } from '../../../cli/ui/guard.ts';
import { type RunningUi, startUi } from '../../../cli/ui/server.ts';
import { SpanBuffer } from '../../../cli/ui/spans.ts';
import { createAwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';

// A store that accepts connections and never answers: the inspector must still answer, with a banner.
const sockets: Socket[] = [];
const silent = createServer((socket) => sockets.push(socket));
const clients = () => {
  const address = silent.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return createAwsClients({
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    maxAttempts: 1,
    requestTimeoutMs: 30_000,
  });
};
const token = 'test-token';
const spans = new SpanBuffer(10);
let ui: RunningUi;
let readOnly: RunningUi;
let aws: ReturnType<typeof createAwsClients>;

beforeAll(async () => {
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  aws = clients();
  const names = {
    queueUrl: 'http://q/jobs',
    dlqUrl: 'http://q/dlq',
    jobsTable: 'jobs',
    leasesTable: 'leases',
  };
  const config = { target: { clients: aws, names }, targetLine: 'test', token, spans, timeoutMs: 300 };
  ui = await startUi({ ...config, readOnly: false }, 0);
  readOnly = await startUi({ ...config, readOnly: true }, 0);
});
afterAll(async () => {
  await ui?.close();
  await readOnly?.close();
  destroyAwsClients(aws);
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => silent.close(resolve));
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request with full control of Host, Origin and Cookie (fetch would set Host itself). */
function call(
  server: RunningUi,
  path: string,
  options: {
    method?: string;
    host?: string;
    headers?: Record<string, string>;
    body?: string;
    cookie?: boolean;
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: server.port,
        path,
        method: options.method ?? 'GET',
        headers: {
          host: options.host ?? `127.0.0.1:${server.port}`,
          ...(options.cookie === false ? {} : { cookie: `${TOKEN_COOKIE}=${token}` }),
          ...options.headers,
        },
      },
      (res) => {
        let body = '';
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

describe('leaseq ui server', () => {
  it('listens on 127.0.0.1 only', () => {
    expect(ui.address).toBe('127.0.0.1');
    expect(ui.url).toBe(`http://127.0.0.1:${ui.port}/?token=${token}`);
  });

  it('answers every page within its bounds with a banner when the store does not answer', async () => {
    for (const path of ['/', '/jobs', '/jobs/some-key', '/api/overview']) {
      const started = Date.now();
      const answer = await call(ui, path);
      expect(answer.status, path).toBe(200);
      expect(answer.body, path).toMatch(/(DynamoDB|SQS) not answering: .* took longer than 300 ms/);
      expect(answer.body, path).not.toMatch(/\n\s+at /);
      expect(Date.now() - started, path).toBeLessThan(3000);
    }
    const overview = await call(ui, '/');
    expect(overview.body).toContain('DynamoDB not answering: scan of the jobs table took longer than 300 ms');
    expect(overview.body).toContain(
      'SQS not answering: jobs queue depth (GetQueueAttributes) took longer than 300 ms',
    );
    expect(overview.body).toContain('<h1>Overview</h1>');
  });

  it('refuses without the token (403), with a foreign Host or Origin, and does no action then', async () => {
    expect((await call(ui, '/', { cookie: false })).status).toBe(403);
    expect((await call(ui, '/?token=wrong', { cookie: false })).status).toBe(403);
    const action = await call(ui, '/dlq/purge', {
      method: 'POST',
      cookie: false,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'confirmed=yes',
    });
    expect(action.status).toBe(403);
    expect((await call(ui, '/', { host: `evil.example:${ui.port}` })).status).toBe(403);
    expect((await call(ui, '/', { headers: { origin: 'http://evil.example' } })).status).toBe(403);
    const redrive = await call(ui, '/dlq/redrive', {
      method: 'POST',
      headers: { origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
      body: 'reason=max-attempts&confirmed=yes',
    });
    expect(redrive.status).toBe(403);
  });

  it('trades the printed token for an HttpOnly SameSite=Strict cookie and drops it from the URL', async () => {
    const answer = await call(ui, `/jobs?token=${token}&status=DEAD`, { cookie: false });
    expect(answer.status).toBe(303);
    expect(answer.headers.location).toBe('/jobs?status=DEAD');
    expect(answer.headers['set-cookie']).toEqual([
      `${TOKEN_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`,
    ]);
    expect(answer.headers['content-security-policy']).toMatch(/frame-ancestors 'none'/);
  });

  it('asks for a confirmation before an action, and has no actions in read-only mode', async () => {
    const form = { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' } };
    const ask = await call(ui, '/dlq/purge', { ...form, body: '' });
    expect(ask.status).toBe(200);
    expect(ask.body).toContain('Confirm purge');
    const refused = await call(readOnly, '/dlq/purge', { ...form, body: 'confirmed=yes' });
    expect(refused.status).toBe(403);
    expect((await call(readOnly, '/dlq/redrive', { ...form, body: 'reason=x&confirmed=yes' })).status).toBe(
      403,
    );
  });

  it('takes OTLP JSON traces without a token, refuses protobuf and bad bodies', async () => {
    const body = JSON.stringify({
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId: 'a'.repeat(32),
                  spanId: 'b'.repeat(16),
                  name: 'x',
                  startTimeUnixNano: '1',
                  endTimeUnixNano: '2',
                },
              ],
            },
          ],
        },
      ],
    });
    const json = { 'content-type': 'application/json' };
    expect(
      (await call(ui, '/v1/traces', { method: 'POST', cookie: false, headers: json, body })).status,
    ).toBe(200);
    expect(spans.received).toBe(1);
    const proto = await call(ui, '/v1/traces', {
      method: 'POST',
      cookie: false,
      headers: { 'content-type': 'application/x-protobuf' },
      body: 'x',
    });
    expect(proto.status).toBe(415);
    expect(proto.body).toContain('OTEL_EXPORTER_OTLP_PROTOCOL=http/json');
    expect(
      (await call(ui, '/v1/traces', { method: 'POST', cookie: false, headers: json, body: '{"a":1}' }))
        .status,
    ).toBe(400);
    expect(
      (
        await call(ui, '/v1/traces', {
          method: 'POST',
          cookie: false,
          host: 'evil.example',
          headers: json,
          body,
        })
      ).status,
    ).toBe(403);
  });

  it("offers and keeps the problem jobs' 'stuck' status filter", async () => {
    const answer = await call(ui, '/jobs?status=stuck');
    expect(answer.body).toContain('<option value="stuck" selected>');
  });
});
