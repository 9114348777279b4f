// LocalStack without Docker, for `npm run test:localstack`: a pinned localstack-core in a virtualenv of
// its own, run in host mode (`python -m localstack.runtime.main`) with SQS only, on 127.0.0.1 only.
//
// Why each setting (measured with 4.14.0 on this project's machines):
// - Python 3.13: the package says >=3.10, but its SQS provider needs 3.12 and its tagging code 3.13;
// - cbor2<6: cbor2 6 changed the API localstack's serializer imports;
// - CUSTOM_SSL_CERT_PATH: the built-in certificate is made with pyOpenSSL, whose version 26 broke it,
//   and the download of LocalStack's own is off (no outside network); ours is made here, per start;
// - GATEWAY_SERVER=hypercorn: the default gateway binds 0.0.0.0 whatever GATEWAY_LISTEN says;
// - DNS_ADDRESS=0: no DNS server (it would bind port 53 on every interface);
// - SQS only: LocalStack's DynamoDB needs Java and DynamoDB Local, which leaseq does not use.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** What the virtualenv holds; a change here reinstalls it. */
export const LOCALSTACK_REQUIREMENTS = ['localstack-core[runtime]==4.14.0', 'cbor2<6'] as const;
const MARKER = 'leaseq-localstack.json';

/** A one-line error for the user (what is missing and what to do), printed without a stack. */
export class LocalStackSetupError extends Error {}

function pythonMinor(python: string, env: NodeJS.ProcessEnv): string | undefined {
  const out = spawnSync(python, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], {
    encoding: 'utf8',
    timeout: 10_000,
    env,
  });
  return out.status === 0 ? out.stdout.trim() : undefined;
}

/**
 * A Python 3.13 to run LocalStack: `LEASEQ_LOCALSTACK_PYTHON`, else `python3.13` on PATH, else pyenv's
 * (`$PYENV_ROOT` or ~/.pyenv, versions/3.13.*), else the plain `python3` when it is 3.13.
 * @throws LocalStackSetupError naming what to install when none is found.
 */
export function findPython(env: NodeJS.ProcessEnv = process.env): string {
  const given = env.LEASEQ_LOCALSTACK_PYTHON?.trim();
  if (given) {
    const minor = pythonMinor(given, env);
    if (minor === '3.13') return given;
    throw new LocalStackSetupError(
      `LEASEQ_LOCALSTACK_PYTHON=${given} is ${minor ? `Python ${minor}` : 'not a Python that runs'}; LocalStack 4.14 needs Python 3.13`,
    );
  }
  const pyenvRoot = env.PYENV_ROOT?.trim() || join(homedir(), '.pyenv');
  const pyenvVersions = join(pyenvRoot, 'versions');
  const fromPyenv = existsSync(pyenvVersions)
    ? readdirSync(pyenvVersions)
        .filter((v) => /^3\.13\.\d+$/.test(v))
        .sort((a, b) => Number(b.split('.')[2]) - Number(a.split('.')[2]))
        .map((v) => join(pyenvVersions, v, 'bin', 'python3'))
    : [];
  for (const candidate of ['python3.13', ...fromPyenv, 'python3']) {
    if (pythonMinor(candidate, env) === '3.13') return candidate;
  }
  throw new LocalStackSetupError(
    'test:localstack needs Python 3.13 (LocalStack 4.14 runs on it only) and found none on PATH or under pyenv: install it (apt-get install python3.13, or pyenv install 3.13) or set LEASEQ_LOCALSTACK_PYTHON to one',
  );
}

function venvPython(venvDir: string): string {
  return join(venvDir, 'bin', 'python');
}

/** Creates (or reuses) the virtualenv with the pinned LocalStack; install output goes to `logFile`. */
export function ensureLocalStack(venvDir: string, logFile: string, say: (line: string) => void): string {
  const marker = join(venvDir, MARKER);
  const wanted = JSON.stringify(LOCALSTACK_REQUIREMENTS);
  if (existsSync(marker) && readFileSync(marker, 'utf8') === wanted && existsSync(venvPython(venvDir))) {
    return venvPython(venvDir);
  }
  const python = findPython();
  say(
    `installing ${LOCALSTACK_REQUIREMENTS.join(' ')} into ${venvDir} with ${python} (first run: about a minute)`,
  );
  rmSync(venvDir, { recursive: true, force: true });
  const log = openSync(logFile, 'w', 0o600);
  const steps: [string, string[]][] = [
    [python, ['-m', 'venv', venvDir]],
    [
      venvPython(venvDir),
      ['-m', 'pip', 'install', '--disable-pip-version-check', ...LOCALSTACK_REQUIREMENTS],
    ],
  ];
  for (const [command, args] of steps) {
    const out = spawnSync(command, args, { stdio: ['ignore', log, log], timeout: 900_000 });
    if (out.status !== 0) {
      throw new LocalStackSetupError(
        `installing LocalStack failed (${command} ${args.join(' ')} exited ${out.status ?? out.signal}): see ${logFile}`,
      );
    }
  }
  writeFileSync(marker, wanted);
  return venvPython(venvDir);
}

/** A self-signed certificate and key in one PEM file, made with the `cryptography` LocalStack brings. */
function writeCertificate(python: string, file: string): void {
  const script = `
import datetime, ipaddress, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
key = ec.generate_private_key(ec.SECP256R1())
name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
now = datetime.datetime.now(datetime.timezone.utc)
cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
  .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
  .not_valid_after(now + datetime.timedelta(days=2))
  .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
  .sign(key, hashes.SHA256()))
with open(sys.argv[1], "wb") as f:
  f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
  f.write(cert.public_bytes(serialization.Encoding.PEM))
`;
  const out = spawnSync(python, ['-c', script, file], { encoding: 'utf8', timeout: 30_000 });
  if (out.status !== 0)
    throw new LocalStackSetupError(`could not make LocalStack's certificate: ${out.stderr.trim()}`);
}

export interface RunningLocalStack {
  readonly endpoint: string;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

/** Starts LocalStack (SQS only) on 127.0.0.1:`port`, its files under `workDir`; resolves when SQS answers. */
export async function startLocalStack(options: {
  python: string;
  port: number;
  workDir: string;
  logFile: string;
}): Promise<RunningLocalStack> {
  const { python, port, workDir } = options;
  mkdirSync(workDir, { recursive: true });
  const certificate = join(workDir, 'server.pem');
  writeCertificate(python, certificate);
  const host = `127.0.0.1:${port}`;
  const log = openSync(options.logFile, 'w', 0o600);
  const child = spawn(python, ['-m', 'localstack.runtime.main'], {
    // Its own process group, so stop() ends every process it forks.
    detached: true,
    stdio: ['ignore', log, log],
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? homedir(),
      SERVICES: 'sqs',
      GATEWAY_LISTEN: host,
      GATEWAY_SERVER: 'hypercorn',
      LOCALSTACK_HOST: host,
      SQS_ENDPOINT_STRATEGY: 'path',
      CUSTOM_SSL_CERT_PATH: certificate,
      SKIP_SSL_CERT_DOWNLOAD: '1',
      DNS_ADDRESS: '0',
      DISABLE_EVENTS: '1',
      LOCALSTACK_VOLUME_DIR: join(workDir, 'volume'),
      TMPDIR: join(workDir, 'tmp'),
      AWS_DEFAULT_REGION: 'us-east-1',
    },
  });
  mkdirSync(join(workDir, 'tmp'), { recursive: true });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = () => stopGroup(child, exited);
  try {
    await waitForSqs(`http://${host}`, child, options.logFile);
  } catch (error) {
    await stop();
    throw error;
  }
  return { endpoint: `http://${host}`, port, pid: child.pid ?? 0, stop };
}

async function waitForSqs(endpoint: string, child: ChildProcess, logFile: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new LocalStackSetupError(`LocalStack exited before it served SQS: see ${logFile}`);
    }
    try {
      const health = (await (await fetch(`${endpoint}/_localstack/health`)).json()) as {
        services?: Record<string, string>;
      };
      if (['available', 'running'].includes(health.services?.sqs ?? '')) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new LocalStackSetupError(`LocalStack did not serve SQS within 120 s: see ${logFile}`);
}

async function stopGroup(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-(child.pid as number), name);
    } catch {
      // already gone
    }
  };
  signal('SIGTERM');
  const done = await Promise.race([
    exited.then(() => true),
    new Promise((r) => setTimeout(() => r(false), 10_000)),
  ]);
  if (!done) signal('SIGKILL');
  await exited;
  // What the group forked and left behind (none seen, but nothing may outlive the run).
  signal('SIGKILL');
}

/** The processes of process group `group` (LocalStack and whatever it forked). */
function groupMembers(group: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        // Field 5 of stat is the process group; the name (field 2) may hold spaces, so count from ')'.
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === group;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** The socket inodes the processes of group `group` hold. */
function socketInodes(group: number): Set<string> {
  const inodes = new Set<string>();
  for (const pid of groupMembers(group)) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (match?.[1]) inodes.add(match[1]);
      } catch {
        // closed meanwhile
      }
    }
  }
  return inodes;
}

/** `0100007F:1F90` (little-endian IPv4) or the IPv6 form, as an address. */
function procAddress(hex: string): string {
  const [address = ''] = hex.split(':');
  if (address.length === 8) {
    return [3, 2, 1, 0].map((i) => Number.parseInt(address.slice(i * 2, i * 2 + 2), 16)).join('.');
  }
  return address === '00000000000000000000000001000000' ? '::1' : address === '0'.repeat(32) ? '::' : address;
}

/**
 * Every TCP socket LocalStack (its process group) listens on and every UDP socket it bound, from /proc (Linux): each must be on
 * 127.0.0.1 (or ::1). Returns them as `tcp 127.0.0.1:4599`.
 * @throws LocalStackSetupError when one is on any other address.
 */
export function assertLoopbackOnly(pid: number): string[] {
  const mine = socketInodes(pid);
  const found: string[] = [];
  for (const table of ['tcp', 'tcp6', 'udp', 'udp6']) {
    const rows = readFileSync(`/proc/net/${table}`, 'utf8').split('\n').slice(1);
    for (const row of rows) {
      const cols = row.trim().split(/\s+/);
      const [local, state, inode] = [cols[1], cols[3], cols[9]];
      if (!local || !inode || !mine.has(inode)) continue;
      if (table.startsWith('tcp') && state !== '0A') continue; // listening sockets only
      const address = procAddress(local);
      const port = Number.parseInt(local.split(':')[1] ?? '0', 16);
      found.push(`${table.replace('6', '')} ${address}:${port}`);
      if (address !== '127.0.0.1' && address !== '::1') {
        throw new LocalStackSetupError(
          `LocalStack listens on ${address}:${port} (${table}), not on 127.0.0.1 only: stopped it`,
        );
      }
    }
  }
  return found;
}
