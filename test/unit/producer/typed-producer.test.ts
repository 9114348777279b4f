import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// fixtures/typed-producer.ts holds the lines a typed producer (and ctx.step's type) must refuse, each under
// `// @ts-expect-error TS<code> <part of the message>`. `npm run typecheck` fails when one of them compiles;
// this test compiles the file without those comments, with the project's compiler options, and checks that
// every such line fails with the diagnostic its comment names, and nothing else fails.
const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../../..');
const fixture = join(here, 'fixtures/typed-producer.ts');
const EXPECT = /^\s*\/\/ @ts-expect-error TS(\d+) (.+)$/;

interface Expected {
  readonly line: number;
  readonly code: number;
  readonly message: string;
}

function compilerOptions(): ts.CompilerOptions {
  const parsed = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.json'), undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  });
  if (!parsed) throw new Error('tsconfig.json did not parse');
  return parsed.options;
}

/** Diagnostics of the fixture compiled alone, with `text` as its content. */
function compile(text: string): readonly ts.Diagnostic[] {
  const options = compilerOptions();
  const host = ts.createCompilerHost(options);
  const readFile = host.readFile.bind(host);
  host.readFile = (name) => (resolve(name) === fixture ? text : readFile(name));
  const program = ts.createProgram({ rootNames: [fixture], options, host });
  return ts.getPreEmitDiagnostics(program);
}

function where(d: ts.Diagnostic): string {
  const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
  const file = d.file ? d.file.fileName.slice(root.length + 1) : '';
  return `${file}(${at ? `${at.line + 1},${at.character + 1}` : '?'}): TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
}

describe('typed producer (compile time)', () => {
  const source = readFileSync(fixture, 'utf8');
  const lines = source.split('\n');
  const expected: Expected[] = [];
  // Each comment becomes a blank line, so line numbers stay those of the file.
  const stripped = lines
    .map((line, i) => {
      const match = EXPECT.exec(line);
      if (!match) return line;
      expected.push({ line: i + 2, code: Number(match[1]), message: match[2] ?? '' });
      return '';
    })
    .join('\n');

  it('names at least the misspelt type and the wrong payload shape', () => {
    expect(expected.length).toBeGreaterThanOrEqual(8);
    expect(expected.some((e) => e.message.includes('"ledger.credt"'))).toBe(true);
    expect(expected.some((e) => e.message.includes("Type 'string' is not assignable to type 'number'"))).toBe(
      true,
    );
  });

  it('refuses every marked line with the diagnostic its comment names, and nothing else', () => {
    const diagnostics = compile(stripped);
    const found = diagnostics.map((d) => ({
      line:
        d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : undefined,
      code: d.code,
      text: where(d),
    }));
    const missed = expected
      .filter((e) => !found.some((f) => f.line === e.line && f.code === e.code && f.text.includes(e.message)))
      .map((e) => {
        const got = found.filter((f) => f.line === e.line).map((f) => f.text);
        return `line ${e.line}: expected TS${e.code} "${e.message}", got ${got.join('; ') || 'no error'}`;
      });
    expect(missed).toEqual([]);
    const stray = found.filter((f) => !expected.some((e) => e.line === f.line)).map((f) => f.text);
    expect(stray).toEqual([]);
  }, 240_000); // a whole program type-checked: over a minute on 2 busy cores
});
