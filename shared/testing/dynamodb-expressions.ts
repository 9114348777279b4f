// DynamoDB's condition and update expressions over in-memory items in document form (what
// `@aws-sdk/lib-dynamodb` hands you: numbers, strings, booleans, null, arrays, objects, Sets, bytes), so
// `ctx.tables.x.put/update/delete` effects with your own expressions apply in memory as DynamoDB applies
// them. The grammar is DynamoDB's (docs: "Condition and filter expressions", "Update expressions"); what it
// cannot evaluate it refuses with a ValidationException, as DynamoDB refuses a malformed request, so a
// test never passes on a guess. test/integration/testing/run-job-agrees.test.ts runs the same effects on the
// emulator and compares. Here: the parses kept by text and the placeholder checks; the parser is
// dynamodb-expression-parser.ts, the evaluator dynamodb-expression-eval.ts.

import { validationException } from './dynamodb-errors.ts';
import { applyUpdate, checkBounds, checkValueDefined, evaluate } from './dynamodb-expression-eval.ts';
import { Parser } from './dynamodb-expression-parser.ts';
import type {
  Condition,
  Item,
  PathPart,
  PlaceholderRead,
  Placeholders,
  UpdateAction,
} from './dynamodb-expression-types.ts';

export type { Condition, Item, Placeholders } from './dynamodb-expression-types.ts';
export { validationException };

/** A parsed condition: `test(item)` evaluates it (item undefined: no such item). */
export function parseCondition(
  expression: string,
  placeholders: Placeholders,
): (item: Item | undefined) => boolean {
  const condition = conditionTree(expression, placeholders);
  return (item) => evaluate(condition, item ?? {}, placeholders);
}

/** The parsed form of a condition (a Query's key condition is checked against the key schema by it). */
export function conditionTree(expression: string, placeholders: Placeholders): Condition {
  return cached('condition', expression, placeholders, (parser) => {
    const parsed = parser.condition();
    if (!parser.done())
      throw validationException(`Invalid ConditionExpression: unexpected ${parser.peek()} in ${expression}`);
    return parsed;
  });
}

/** A parsed update: `apply(item)` returns the updated copy (the item created from its key when absent). */
export function parseUpdate(expression: string, placeholders: Placeholders): (item: Item) => Item {
  const actions = cached('update', expression, placeholders, updateActions);
  return (item) => applyUpdate(actions, item, placeholders);
}

/** The document paths an update's actions write (SET, REMOVE, ADD, DELETE), in the expression's order. */
export function updatePaths(
  expression: string,
  placeholders: Placeholders,
): readonly (readonly PathPart[])[] {
  return cached('update', expression, placeholders, updateActions).map((a) => a.path);
}

function updateActions(parser: Parser): readonly UpdateAction[] {
  const expression = parser.text;
  const actions: UpdateAction[] = [];
  const seen = new Set<string>();
  while (!parser.done()) {
    const clause = parser.next().toUpperCase();
    if (!['SET', 'REMOVE', 'ADD', 'DELETE'].includes(clause) || seen.has(clause)) {
      throw validationException(`Invalid UpdateExpression: unexpected ${clause} in ${expression}`);
    }
    seen.add(clause);
    do {
      if (actions.length > 0 && parser.peek() === ',') parser.next();
      const path = parser.path();
      if (clause === 'SET') {
        parser.expect('=');
        actions.push({ kind: 'set', path, value: parser.setValue() });
      } else if (clause === 'REMOVE') {
        actions.push({ kind: 'remove', path });
      } else {
        actions.push({ kind: clause === 'ADD' ? 'add' : 'delete', path, value: parser.operand() });
      }
    } while (parser.peek() === ',');
  }
  if (actions.length === 0)
    throw validationException('Invalid UpdateExpression: The expression can not be empty');
  checkOverlaps(actions);
  return actions;
}

/** DynamoDB refuses an update two of whose actions write one path, or a path and a part of it. */
function checkOverlaps(actions: readonly UpdateAction[]): void {
  for (let i = 0; i < actions.length; i++) {
    for (let j = i + 1; j < actions.length; j++) {
      const [a, b] = [(actions[i] as UpdateAction).path, (actions[j] as UpdateAction).path];
      const n = Math.min(a.length, b.length);
      let shared = 0;
      while (shared < n && a[shared] === b[shared]) shared++;
      if (shared === n) {
        const show = (p: readonly PathPart[]) =>
          `[${p.map((x) => (typeof x === 'number' ? `[${x}]` : x)).join(', ')}]`;
        throw validationException(
          `Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: ${show(a)}, path two: ${show(b)}`,
        );
      }
    }
  }
}

/**
 * Parsed expressions by kind and text, with what each parse read of its placeholders, in order: the
 * attribute each `#name` stood for, the `:value`s it needed defined, and the BETWEENs whose given bounds
 * it compared. A use whose names stand for the same attributes takes the parse and runs the value checks
 * again, in that order, so it throws what a fresh parse would; any other use parses afresh. Only parses
 * that succeeded are kept: a refused expression is refused again, with the same error, on every call.
 */
const PARSED = {
  condition: new Map<string, ParsedExpression>(),
  update: new Map<string, ParsedExpression>(),
};
interface ParsedExpression {
  readonly parsed: unknown;
  readonly reads: readonly PlaceholderRead[];
}
const PARSED_MAX = 1000;
/** DynamoDB's limit on an expression, in bytes as sent (which also bounds what a kept parse holds). */
const MAX_EXPRESSION_BYTES = 4096;

function cached<T>(
  kind: 'condition' | 'update',
  expression: string,
  placeholders: Placeholders,
  parse: (parser: Parser) => T,
): T {
  // The short-cut: a UTF-16 unit is at most 3 bytes of UTF-8.
  if (expression.length * 3 > MAX_EXPRESSION_BYTES && Buffer.byteLength(expression) > MAX_EXPRESSION_BYTES) {
    throw validationException(
      `Invalid ${kind === 'condition' ? 'ConditionExpression' : 'UpdateExpression'}: Expression size has exceeded the maximum allowed size; expression size: ${Buffer.byteLength(expression)} bytes (at most ${MAX_EXPRESSION_BYTES})`,
    );
  }
  const parsedOfKind = PARSED[kind];
  const hit = parsedOfKind.get(expression);
  if (hit !== undefined && sameNames(hit.reads, placeholders)) {
    for (const read of hit.reads) {
      if (read.kind === 'value') checkValueDefined(placeholders, read.token);
      else if (read.kind === 'between') checkBounds(placeholders, read.low, read.high);
    }
    return hit.parsed as T;
  }
  const parser = new Parser(expression, placeholders, kind);
  const parsed = parse(parser);
  if (parsedOfKind.size >= PARSED_MAX) parsedOfKind.clear();
  parsedOfKind.set(expression, { parsed, reads: parser.reads });
  return parsed;
}

/** A placeholder as a whole token (not the start of a longer one), by placeholder. */
const TOKEN_PATTERNS = new Map<string, RegExp>();
const SIMPLE_TOKEN = /^[#:][A-Za-z0-9_]+$/;
/** The `#name` and `:value` tokens of an expression, by its text. */
const TOKENS = new Map<string, ReadonlySet<string>>();

function tokensOf(expression: string): ReadonlySet<string> {
  let tokens = TOKENS.get(expression);
  if (tokens === undefined) {
    tokens = new Set(expression.match(/[#:][A-Za-z0-9_]+/g) ?? []);
    if (TOKENS.size >= PARSED_MAX) TOKENS.clear();
    TOKENS.set(expression, tokens);
  }
  return tokens;
}

function sameNames(reads: readonly PlaceholderRead[], placeholders: Placeholders): boolean {
  for (const read of reads) {
    if (read.kind === 'name' && placeholders.names?.[read.token] !== read.name) return false;
  }
  return true;
}

/**
 * Throws DynamoDB's ValidationException for placeholders a request defines but none of its expressions
 * uses (DynamoDB refuses those too).
 */
export function checkUnusedPlaceholders(placeholders: Placeholders, expressions: readonly string[]): void {
  for (const [field, map] of [
    ['ExpressionAttributeNames', placeholders.names],
    ['ExpressionAttributeValues', placeholders.values],
  ] as const) {
    if (map !== undefined && Object.keys(map).length === 0) {
      throw validationException(`1 validation error detected: ${field} must not be empty`);
    }
  }
  const used = (token: string) => {
    // A placeholder of word characters is used when an expression has it as a whole token (its tokens
    // are read once per expression text); any other spelling is looked for as written.
    if (SIMPLE_TOKEN.test(token)) {
      for (const e of expressions) if (tokensOf(e).has(token)) return true;
      return false;
    }
    let whole = TOKEN_PATTERNS.get(token);
    if (whole === undefined) {
      if (TOKEN_PATTERNS.size >= PARSED_MAX) TOKEN_PATTERNS.clear();
      whole = new RegExp(`${token}(?![A-Za-z0-9_])`);
      TOKEN_PATTERNS.set(token, whole);
    }
    const pattern = whole;
    return expressions.some((e) => pattern.test(e));
  };
  for (const name of Object.keys(placeholders.names ?? {})) {
    if (!used(name)) {
      throw validationException(
        `Value provided in ExpressionAttributeNames unused in expressions: keys: {${name}}`,
      );
    }
  }
  for (const name of Object.keys(placeholders.values ?? {})) {
    if (!used(name)) {
      throw validationException(
        `Value provided in ExpressionAttributeValues unused in expressions: keys: {${name}}`,
      );
    }
  }
}
