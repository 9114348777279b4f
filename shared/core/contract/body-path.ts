/**
 * The path syntax of plain bodies (docs/envelope.md, "Plain bodies"): a subset of JMESPath that reads one
 * value out of a JSON document, so an expression written for Powertools' `eventKeyJmesPath` that only
 * selects a field means the same here. What it takes:
 *
 * - a field by name: `orderId`; nested fields joined by dots: `order.customer.id`;
 * - a field whose name is not an identifier, in double quotes (a JSON string): `"detail-type"`, `"a.b"`;
 * - an array index after a field, or first: `items[0].sku`, `Records[-1]`, `[0].id` (negative from the end).
 *
 * Anything else of JMESPath (functions, projections, filters, multi-select, pipes, literals) is refused
 * when the path is compiled: a function of the body does what those would. As in JMESPath, a field of
 * something that is not an object, or an index of something that is not an array, selects nothing.
 */

/** One step of a compiled path. */
type Step = { readonly field: string } | { readonly index: number };

/** A compiled path: reads its value from a parsed JSON document, `undefined` when it selects nothing. */
export interface BodyPath {
  /** The path as written. */
  readonly source: string;
  read(document: unknown): unknown;
}

/** A path the syntax does not take: the compile's refusal, naming the place and what was expected. */
export class BodyPathSyntaxError extends Error {
  constructor(path: string, at: number, expected: string) {
    super(`path ${JSON.stringify(path)}: expected ${expected} at character ${at + 1}`);
    this.name = 'BodyPathSyntaxError';
  }
}

const IDENTIFIER = /[A-Za-z_][A-Za-z0-9_]*/y;
const INDEX = /\[(-?\d{1,9})\]/y;

/** Compiles `path` once; reading it then costs a few property reads. @throws BodyPathSyntaxError */
export function compileBodyPath(path: string): BodyPath {
  if (typeof path !== 'string' || path.length === 0) {
    throw new BodyPathSyntaxError(String(path), 0, 'a field name');
  }
  const steps: Step[] = [];
  let at = 0;
  const indexes = () => {
    for (;;) {
      INDEX.lastIndex = at;
      const match = INDEX.exec(path);
      if (!match) return;
      steps.push({ index: Number(match[1]) });
      at = INDEX.lastIndex;
    }
  };
  // A path may start with an index ([0].id); then fields, each followed by its indexes, joined by dots.
  indexes();
  let needField = steps.length === 0;
  while (at < path.length || needField) {
    if (!needField) {
      if (path[at] !== '.') throw new BodyPathSyntaxError(path, at, 'a dot or [index]');
      at += 1;
    }
    steps.push({ field: readField(path, at, (end) => (at = end)) });
    indexes();
    needField = false;
  }
  const frozen = Object.freeze(steps);
  return Object.freeze({ source: path, read: (document: unknown) => readSteps(frozen, document) });
}

/** A field name at `at` (an identifier or a JSON string in double quotes); `moveTo` gets its end. */
function readField(path: string, at: number, moveTo: (end: number) => void): string {
  if (path[at] === '"') {
    // The quoted name runs to the first double quote not escaped by a backslash.
    let end = at + 1;
    while (end < path.length && path[end] !== '"') end += path[end] === '\\' ? 2 : 1;
    if (end >= path.length) throw new BodyPathSyntaxError(path, at, 'a closing double quote');
    let name: unknown;
    try {
      name = JSON.parse(path.slice(at, end + 1));
    } catch {
      throw new BodyPathSyntaxError(path, at, 'a JSON string');
    }
    moveTo(end + 1);
    return name as string;
  }
  IDENTIFIER.lastIndex = at;
  const match = IDENTIFIER.exec(path);
  if (!match) {
    throw new BodyPathSyntaxError(path, at, 'a field name (letters, digits, _; others in double quotes)');
  }
  moveTo(IDENTIFIER.lastIndex);
  return match[0];
}

function readSteps(steps: readonly Step[], document: unknown): unknown {
  let value = document;
  for (const step of steps) {
    if (value === null || typeof value !== 'object') return undefined;
    if ('field' in step) {
      if (Array.isArray(value) || !Object.hasOwn(value, step.field)) return undefined;
      value = (value as Record<string, unknown>)[step.field];
    } else {
      if (!Array.isArray(value)) return undefined;
      value = value[step.index < 0 ? value.length + step.index : step.index];
    }
  }
  return value === null ? undefined : value;
}
