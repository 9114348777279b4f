import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import {
  type EmulatorState,
  parseEmulatorState,
  readEmulatorState,
  removeEmulatorState,
  writeEmulatorState,
} from '../../../shared/local/state.ts';
import { tempDir } from './fixtures.ts';

const valid: EmulatorState = {
  pid: 4242,
  port: 4566,
  host: '127.0.0.1',
  emulator: 'ministack',
  version: '1.5.33',
  startedAt: '2026-11-29T10:00:00.000Z',
  startupMs: 412,
};

describe('Function: parseEmulatorState', () => {
  test('returns the record for a complete, valid file', () => {
    expect(parseEmulatorState(JSON.stringify(valid))).toEqual(valid);
  });

  test('keeps the optional autoStop flag', () => {
    expect(parseEmulatorState(JSON.stringify({ ...valid, autoStop: true }))).toEqual({
      ...valid,
      autoStop: true,
    });
  });

  test.each([
    ['not JSON', '{"pid": 42'],
    ['empty', ''],
    ['an array', '[]'],
    ['missing port', JSON.stringify({ ...valid, port: undefined })],
    ['pid not positive', JSON.stringify({ ...valid, pid: 0 })],
    ['pid not an integer', JSON.stringify({ ...valid, pid: 1.5 })],
    ['port out of range', JSON.stringify({ ...valid, port: 70_000 })],
    ['port as a string', JSON.stringify({ ...valid, port: '4566' })],
    ['empty emulator name', JSON.stringify({ ...valid, emulator: '' })],
    ['autoStop not a boolean', JSON.stringify({ ...valid, autoStop: 'yes' })],
  ])('returns undefined for %s', (_case, text) => {
    expect(parseEmulatorState(text)).toBeUndefined();
  });
});

describe('Function: writeEmulatorState / readEmulatorState', () => {
  let temp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    temp = tempDir();
  });
  afterEach(() => temp.remove());

  test('round-trips, leaves no temporary file behind and removes cleanly', () => {
    // Prepare
    const file = join(temp.dir, 'nested', 'emulator.json');

    // Act
    writeEmulatorState(file, valid);

    // Assess
    expect(readEmulatorState(file)).toEqual(valid);
    expect(readdirSync(join(temp.dir, 'nested'))).toEqual(['emulator.json']);
    removeEmulatorState(file);
    expect(existsSync(file)).toBe(false);
    expect(readEmulatorState(file)).toBeUndefined();
  });

  test('reads a torn or hand-edited file as absent', () => {
    const file = join(temp.dir, 'emulator.json');
    writeFileSync(file, '{"pid": 12, "port": 45');
    expect(readEmulatorState(file)).toBeUndefined();
  });
});
