import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { workerCredential } from '../../../chaos/worker-credential.ts';
import { writeLocalCredential } from '../../../shared/aws/local-credential.ts';

// The chaos workers go through Toxiproxy (another port), so they get the store's credential in their
// environment. Run with AWS_ENDPOINT_URL naming leaseq's own emulator (as the tests run), the handle
// carries no credential: before, the workers then signed with test/test and every poll was refused
// ("126 refused POST /: UnrecognizedClientException", done 0 of 60 after 190 s).

const stateDir = mkdtempSync(join(tmpdir(), 'leaseq-chaos-cred-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));
const env = { LEASEQ_STATE_DIR: stateDir };
const stored = { accessKeyId: 'LSQTESTKEY', secretAccessKey: 'secret-of-this-start' };

it("gives the workers the stored credential of leaseq's emulator named by AWS_ENDPOINT_URL", () => {
  writeLocalCredential(stateDir, stored, 24_567);

  expect(workerCredential({ endpoint: 'http://127.0.0.1:24567' }, env)).toEqual(stored);
});

it('gives the embedded emulator its own, and another emulator none (the environment decides)', () => {
  const own = { accessKeyId: 'OWN', secretAccessKey: 'own' };
  expect(workerCredential({ endpoint: 'http://127.0.0.1:24567', credentials: own }, env)).toEqual(own);
  expect(workerCredential({ endpoint: 'http://127.0.0.1:4566' }, env)).toBeUndefined();
});
