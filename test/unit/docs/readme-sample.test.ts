import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Where the sample's files seem to live: inside the checkout, so zod and aws-cdk-lib resolve as in an app. */
const APP = join(ROOT, '__readme_sample__');

/**
 * The README's first TypeScript block, split into the files it shows: each `// <path>.ts: ...` line
 * starts one. Text before the first such line would belong to no file and is refused.
 */
function sampleFiles(): Map<string, string> {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!block) throw new Error('README.md has no ```ts block');
  const files = new Map<string, string>();
  let current: string | undefined;
  for (const line of block.split('\n')) {
    const path = /^\/\/ ((?:src|infra)\/[\w/.-]+\.ts)\b/.exec(line)?.[1];
    if (path) current = join(APP, path);
    else if (current === undefined && line.trim())
      throw new Error(`README sample: "${line}" precedes the first file`);
    if (current) files.set(current, `${files.get(current) ?? ''}${line}\n`);
  }
  return files;
}

/**
 * `leaseq`, `leaseq/producer`, ... as package.json `exports` maps them (their `.d.ts` in dist/), pointed at
 * the source those declarations are built from, so the check needs no build.
 */
function exportPaths(): Record<string, string[]> {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const paths: Record<string, string[]> = {};
  for (const [key, target] of Object.entries(pkg.exports as Record<string, { types?: string }>)) {
    if (!target.types) continue;
    const source = target.types.replace(/^\.\/dist\//, '').replace(/\.d\.ts$/, '.ts');
    paths[key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`] = [source];
  }
  // aws-cdk-lib's root re-exports every service's declarations (some 2,600 files, most of this check's
  // time); the sample and the construct take only its core (App, Stack, Duration) from the root. A name
  // outside the core fails here rather than passing, so this only makes the check faster.
  paths['aws-cdk-lib'] = ['node_modules/aws-cdk-lib/core/index.d.ts'];
  return paths;
}

/** Stand-ins for what the sample imports from the user's own code (their mail client). */
const USER_CODE = new Map([
  [
    join(APP, 'src/mailer.ts'),
    'export const mailer = { async send(_message: unknown, _options: { idempotencyKey: string }) { return { id: "m-1" }; } };\n',
  ],
]);

function typeErrors(files: ReadonlyMap<string, string>): string[] {
  const virtual = new Map([...files, ...USER_CODE, [join(APP, 'package.json'), '{ "type": "module" }']]);
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2023.d.ts'],
    types: ['node'],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    allowImportingTsExtensions: true,
    verbatimModuleSyntax: true,
    baseUrl: ROOT,
    paths: exportPaths(),
  };
  const host = ts.createCompilerHost(options);
  const dirs = new Set([...virtual.keys()].flatMap((f) => [dirname(f), dirname(dirname(f))]));
  const { fileExists, readFile, directoryExists, getSourceFile } = host;
  host.fileExists = (f) => virtual.has(f) || fileExists.call(host, f);
  host.readFile = (f) => virtual.get(f) ?? readFile.call(host, f);
  host.directoryExists = (d) => dirs.has(d) || (directoryExists?.call(host, d) ?? false);
  host.getSourceFile = (f, language, ...rest) => {
    const text = virtual.get(f);
    return text === undefined
      ? getSourceFile.call(host, f, language, ...rest)
      : ts.createSourceFile(f, text, language);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  // Only the sample's files are checked (the source they import is checked by tsc -p): the checker then
  // reads the library's types lazily, which keeps this a few seconds.
  const diagnostics = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...[...files.keys()].flatMap((f) => {
      const source = program.getSourceFile(f);
      return source
        ? [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]
        : [];
    }),
  ];
  return diagnostics.map((d) => {
    const where = d.file
      ? `${d.file.fileName.slice(APP.length + 1)}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}`
      : '';
    return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

describe("README's code sample", () => {
  // One program of ~2,100 declaration files (the SDK's, the construct's CDK modules): 5-10 s on an idle
  // machine, longer on a loaded one.
  it('type-checks with its own imports against the package exports', { timeout: 120_000 }, () => {
    // Arrange
    const files = sampleFiles();
    expect(files.size).toBeGreaterThan(1);

    // Act
    const errors = typeErrors(files);

    // Assert
    expect(errors).toEqual([]);
  });
});
