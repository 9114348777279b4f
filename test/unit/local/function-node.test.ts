import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { chooseFunctionNode, nodeRuntimes, runtimeMismatch } from '../../../shared/local/function-node.ts';
import { parseEmulatorState } from '../../../shared/local/state.ts';

// The embedded emulator has one Node for every function: the project's Node dev dependency when it has
// one, and a deploy says in one line when a function declares another major.

const dir = mkdtempSync(join(tmpdir(), 'leaseq-fnode-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('chooseFunctionNode', () => {
  test('takes the first project directory with a node_modules/.bin/node that runs', () => {
    const none = join(dir, 'none');
    const broken = join(dir, 'broken');
    const project = join(dir, 'project');
    mkdirSync(join(broken, 'node_modules', '.bin'), { recursive: true });
    writeFileSync(join(broken, 'node_modules', '.bin', 'node'), 'not a program');
    mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true });
    symlinkSync(process.execPath, join(project, 'node_modules', '.bin', 'node'));
    expect(chooseFunctionNode([none, broken, project], '/nowhere/node')).toEqual({
      path: join(project, 'node_modules', '.bin', 'node'),
      version: process.version,
    });
  });

  test('falls back to the Node running leaseq', () => {
    expect(chooseFunctionNode([join(dir, 'none')])).toEqual({
      path: process.execPath,
      version: process.version,
    });
  });
});

describe('runtimeMismatch', () => {
  const template = join(dir, 'stack.template.json');
  writeFileSync(
    template,
    JSON.stringify({
      Resources: {
        Worker: { Type: 'AWS::Lambda::Function', Properties: { Runtime: 'nodejs22.x' } },
        Py: { Type: 'AWS::Lambda::Function', Properties: { Runtime: 'python3.12' } },
        Queue: { Type: 'AWS::SQS::Queue', Properties: {} },
      },
    }),
  );

  test('reads the Node functions of the templates', () => {
    expect(nodeRuntimes([template, join(dir, 'absent.json')])).toEqual([
      { id: 'Worker', runtime: 'nodejs22.x' },
    ]);
  });

  test('says nothing when the majors match', () => {
    expect(runtimeMismatch(nodeRuntimes([template]), { path: '/n', version: 'v22.23.3' })).toBeUndefined();
  });

  test('one line naming the function, its runtime, the Node it runs on and what to do', () => {
    const line = runtimeMismatch(nodeRuntimes([template]), { path: '/usr/bin/node', version: 'v20.20.2' });
    expect(line).toBe(
      'warning: Worker declares nodejs22.x, but the emulator runs functions on Node v20.20.2 (/usr/bin/node): install Node 22 in the project (npm install --save-dev node@22) and restart the emulator (leaseq local down, then leaseq local up)',
    );
    expect(line).not.toContain('\n');
  });

  test('functions of several Node majors: no advice to install one that moves the others off theirs', () => {
    // A bucket with autoDeleteObjects in the same app: CDK's handler declares the latest Node.
    const functions = [
      { id: 'Worker', runtime: 'nodejs22.x' },
      { id: 'CustomS3AutoDeleteObjectsHandler', runtime: 'nodejs24.x' },
    ];
    const line = runtimeMismatch(functions, { path: '/p/node', version: 'v22.23.3' });
    expect(line).toBe(
      'warning: CustomS3AutoDeleteObjectsHandler declares nodejs24.x, but the emulator runs functions on Node v22.23.3 (/p/node): it runs every function on that one Node, and the functions declare several majors (nodejs22.x, nodejs24.x)',
    );
  });

  test('the emulator record keeps the Node it was started with', () => {
    const record = {
      pid: 1,
      port: 4566,
      host: '127.0.0.1',
      emulator: 'ministack',
      version: '1.5.33',
      startedAt: 'x',
      startupMs: 1,
      node: { path: '/p/node', version: 'v22.1.0' },
    };
    expect(parseEmulatorState(JSON.stringify(record))?.node).toEqual(record.node);
  });
});
