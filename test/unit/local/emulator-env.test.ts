import { delimiter } from 'node:path';
import { describe, expect, test } from 'vitest';
import { emulatorEnv } from '../../../shared/local/emulator-env.ts';

// The emulator's Lambda executor gives its own environment to every function it runs, so what the
// emulator gets is what any code deployed to it gets: an allow-list, never the operator's shell.

const shell: NodeJS.ProcessEnv = {
  PATH: '/usr/local/bin:/usr/bin',
  HOME: '/home/op',
  LANG: 'C.UTF-8',
  LC_ALL: 'C.UTF-8',
  TZ: 'UTC',
  TMPDIR: '/tmp/op',
  AWS_REGION: 'eu-west-1',
  AWS_ACCESS_KEY_ID: 'AKIAREALKEY',
  AWS_SECRET_ACCESS_KEY: 'real-secret',
  AWS_SESSION_TOKEN: 'real-token',
  AWS_PROFILE: 'prod',
  AWS_SHARED_CREDENTIALS_FILE: '/home/op/.aws/credentials',
  AWS_CONFIG_FILE: '/home/op/.aws/config',
  AWS_ENDPOINT_URL: 'http://127.0.0.1:4610',
  GITHUB_TOKEN: 'ghp_secret',
  NODE_OPTIONS: '--require /home/op/hook.js',
  LEASEQ_TEST_SECRET_PROBE: 'x',
};

/** The credential of one start (the emulator's own, never the shell's). */
const credential = { accessKeyId: 'LSQSTARTKEYID0000000', secretAccessKey: 'start-secret' };

describe('Function: emulatorEnv', () => {
  test('passes paths, locale, time zone and region; nothing else of the shell', () => {
    // Act
    const env = emulatorEnv(shell, { GATEWAY_PORT: '4599' }, credential, '/opt/node22/bin/node');

    // Assess
    expect(env).toEqual({
      HOME: '/home/op',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TZ: 'UTC',
      TMPDIR: '/tmp/op',
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'LSQSTARTKEYID0000000',
      AWS_SECRET_ACCESS_KEY: 'start-secret',
      GATEWAY_PORT: '4599',
      PATH: ['/opt/node22/bin', '/usr/local/bin:/usr/bin'].join(delimiter),
      PYTHONUNBUFFERED: '1',
    });
  });

  test("replaces the shell credentials with the start's own, and drops profile, token and endpoint", () => {
    // Act
    const env = emulatorEnv(shell, {}, credential);

    // Assess
    expect(env.AWS_ACCESS_KEY_ID).toBe(credential.accessKeyId);
    expect(env.AWS_SECRET_ACCESS_KEY).toBe(credential.secretAccessKey);
    for (const name of [
      'AWS_SESSION_TOKEN',
      'AWS_PROFILE',
      'AWS_SHARED_CREDENTIALS_FILE',
      'AWS_CONFIG_FILE',
      'AWS_ENDPOINT_URL',
      'GITHUB_TOKEN',
      'NODE_OPTIONS',
      'LEASEQ_TEST_SECRET_PROBE',
    ]) {
      expect(env, name).not.toHaveProperty(name);
    }
  });

  test('starts PATH with the running Node even when the shell has no PATH', () => {
    // Act
    const env = emulatorEnv({}, {}, credential, '/opt/node22/bin/node');

    // Assess
    expect(env.PATH).toBe('/opt/node22/bin');
  });
});
