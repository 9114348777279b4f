import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { remoteEndpointWarning } from '../../../cli/remote-endpoint.ts';

// A command pointed at an endpoint that is not on this machine signs its requests with the operator's
// own AWS credentials: that endpoint receives the access key id and any session token. It says so.

const BIN = fileURLToPath(new URL('../../../bin/leaseq.mjs', import.meta.url));

describe('Function: remoteEndpointWarning', () => {
  it('warns for an endpoint elsewhere reached with the default credentials, not for local or test keys', () => {
    expect(remoteEndpointWarning('http://10.1.2.3:4566', { AWS_PROFILE: 'prod' })).toBe(
      'warning: http://10.1.2.3:4566 is not on this machine, and requests to it are signed with your AWS credentials (AWS_PROFILE=prod): it receives your access key id and any session token; use keys meant for it (AWS_ACCESS_KEY_ID=test for an emulator)',
    );
    expect(remoteEndpointWarning('http://127.0.0.1:4566', { AWS_PROFILE: 'prod' })).toBeUndefined();
    expect(remoteEndpointWarning(undefined, {})).toBeUndefined();
    expect(remoteEndpointWarning('http://10.1.2.3:4566', { AWS_ACCESS_KEY_ID: 'test' })).toBeUndefined();
  });
});

it('prints the warning before a command sends anything to a non-local --endpoint', () => {
  // 127.0.0.2 is on this machine's loopback but not an address leaseq counts as local: nothing listens.
  const run = spawnSync(process.execPath, [BIN, 'status', '--endpoint', 'http://127.0.0.2:9'], {
    env: {
      ...process.env,
      AWS_ENDPOINT_URL: '',
      AWS_ACCESS_KEY_ID: 'AKIAEXAMPLEKEY',
      AWS_SECRET_ACCESS_KEY: 'x',
    },
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(run.stderr.split('\n')[0]).toBe(
    'leaseq: warning: http://127.0.0.2:9 is not on this machine, and requests to it are signed with your AWS credentials (AWS_ACCESS_KEY_ID): it receives your access key id and any session token; use keys meant for it (AWS_ACCESS_KEY_ID=test for an emulator)',
  );
  expect(run.status).not.toBe(0);
}, 40_000);
