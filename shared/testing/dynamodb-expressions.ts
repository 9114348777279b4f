// DynamoDB's condition and update expressions over in-memory items in document form (what
// `@aws-sdk/lib-dynamodb` hands you: numbers, strings, booleans, null, arrays, objects, Sets, bytes), so
// `ctx.tables.x.put/update/delete` effects with your own expressions apply in memory as DynamoDB applies
// them. The grammar is DynamoDB's (docs: "Condition and filter expressions", "Update expressions"); what it
// cannot evaluate it refuses with a ValidationException, as DynamoDB refuses a malformed request, so a
// test never passes on a guess. test/integration/testing/run-job-agrees.test.ts runs the same effects on the
// emulator and compares.

import { isDeepStrictEqual } from 'node:util';
import { validationException } from './dynamodb-errors.ts';
import { addNumbers, compareNumbers, isDynamoNumber } from './dynamodb-numbers.ts';
import { DYNAMODB_RESERVED_WORDS } from './dynamodb-reserved-words.ts';

export type Item = Record<string, unknown>;

/** Placeholders of one expression: `#name` -> attribute name, `:value` -> value. */
export interface Placeholders {
  readonly names?: Readonly<Record<string, string>> | undefined;
  readonly values?: Readonly<Record<string, unknown>> | undefined;
}

export { validationException };

type PathPart = string | number;
type Operand =
  | { readonly kind: 'path'; readonly path: readonly PathPart[] }
  | { readonly kind: 'value'; readonly name: string }
  | { readonly kind: 'call'; readonly fn: string; readonly args: readonly Operand[] }
  | { readonly kind: 'arith'; readonly op: '+' | '-'; readonly left: Operand; readonly right: Operand };
type Condition =
  | { readonly kind: 'and' | 'or'; readonly left: Condition; readonly right: Condition }
  | { readonly kind: 'not'; readonly inner: Condition }
  | { readonly kind: 'compare'; readonly op: string; readonly left: Operand; readonly right: Operand }
  | { readonly kind: 'between'; readonly subject: Operand; readonly low: Operand; readonly high: Operand }
  | { readonly kind: 'in'; readonly subject: Operand; readonly list: readonly Operand[] }
  | { readonly kind: 'fn'; readonly call: Operand & { kind: 'call' } };
type UpdateAction =
  | { readonly kind: 'set'; readonly path: readonly PathPart[]; readonly value: Operand }
  | { readonly kind: 'remove'; readonly path: readonly PathPart[] }
  | { readonly kind: 'add' | 'delete'; readonly path: readonly PathPart[]; readonly value: Operand };

const TOKEN = /\s*(#[A-Za-z0-9_]+|:[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*|\d+|<>|<=|>=|[=<>(),.[\]+-])/y;

class Parser {
  readonly #tokens: string[] = [];
  #at = 0;
  /** Placeholders the expression used (DynamoDB refuses unused ones). */
  readonly usedNames = new Set<string>();
  readonly usedValues = new Set<string>();
  /** What the parse read of the placeholders, in order (see {@link cached}). */
  readonly reads: PlaceholderRead[] = [];

  constructor(
    readonly text: string,
    readonly placeholders: Placeholders,
    readonly kind: 'condition' | 'update',
  ) {
    TOKEN.lastIndex = 0;
    let end = 0;
    for (let m = TOKEN.exec(text); m !== null; m = TOKEN.exec(text)) {
      this.#tokens.push(m[1] ?? '');
      end = TOKEN.lastIndex;
    }
    if (text.slice(end).trim() !== '') {
      throw validationException(
        `Invalid expression: unexpected text ${JSON.stringify(text.slice(end).trim())}`,
      );
    }
  }

  peek(offset = 0): string | undefined {
    return this.#tokens[this.#at + offset];
  }
  peekWord(): string | undefined {
    return this.peek()?.toUpperCase();
  }
  next(): string {
    const token = this.#tokens[this.#at++];
    if (token === undefined) throw validationException(`Invalid expression: ${this.text} ends too early`);
    return token;
  }
  expect(token: string): void {
    const got = this.next();
    if (got.toUpperCase() !== token) {
      throw validationException(`Invalid expression: expected ${token}, got ${got} in ${this.text}`);
    }
  }
  done(): boolean {
    return this.#at >= this.#tokens.length;
  }

  condition(): Condition {
    let left = this.#andTerm();
    while (this.peekWord() === 'OR') {
      this.next();
      left = { kind: 'or', left, right: this.#andTerm() };
    }
    return left;
  }

  #andTerm(): Condition {
    let left = this.#notTerm();
    while (this.peekWord() === 'AND') {
      this.next();
      left = { kind: 'and', left, right: this.#notTerm() };
    }
    return left;
  }

  #notTerm(): Condition {
    if (this.peekWord() === 'NOT') {
      this.next();
      return { kind: 'not', inner: this.#notTerm() };
    }
    return this.#predicate();
  }

  #predicate(): Condition {
    if (this.peek() === '(') {
      this.next();
      const inner = this.condition();
      this.expect(')');
      return inner;
    }
    const subject = this.operand();
    const word = this.peekWord();
    if (word === 'BETWEEN') {
      this.next();
      const low = this.operand();
      this.expect('AND');
      const high = this.operand();
      this.#checkBounds(low, high);
      return { kind: 'between', subject, low, high };
    }
    if (word === 'IN') {
      this.next();
      this.expect('(');
      const list = [this.operand()];
      while (this.peek() === ',') {
        this.next();
        list.push(this.operand());
      }
      this.expect(')');
      return { kind: 'in', subject, list };
    }
    if (word && ['=', '<>', '<', '<=', '>', '>='].includes(word)) {
      this.next();
      return { kind: 'compare', op: word, left: subject, right: this.operand() };
    }
    if (subject.kind === 'call' && subject.fn !== 'size') return { kind: 'fn', call: subject };
    throw validationException(
      `Invalid ConditionExpression: a comparison or function expected in ${this.text}`,
    );
  }

  /** DynamoDB refuses a BETWEEN whose given bounds are reversed, whatever the item holds. */
  #checkBounds(low: Operand, high: Operand): void {
    if (low.kind !== 'value' || high.kind !== 'value') return;
    this.reads.push({ kind: 'between', low: low.name, high: high.name });
    checkBounds(this.placeholders, low.name, high.name);
  }

  /** A path, a `:value`, or a function call (`size(...)`, `if_not_exists(...)`, ...). */
  operand(): Operand {
    const token = this.peek();
    if (token?.startsWith(':')) {
      this.next();
      checkValueDefined(this.placeholders, token);
      this.reads.push({ kind: 'value', token });
      this.usedValues.add(token);
      return { kind: 'value', name: token };
    }
    if (token && /^[A-Za-z_]/.test(token) && this.peek(1) === '(') {
      const fn = this.next();
      this.next();
      const args: Operand[] = [];
      if (this.peek() !== ')') {
        args.push(this.operand());
        while (this.peek() === ',') {
          this.next();
          args.push(this.operand());
        }
      }
      this.expect(')');
      const allowed = this.kind === 'condition' ? CONDITION_FUNCTIONS : UPDATE_FUNCTIONS;
      if (!allowed.has(fn)) {
        const other = this.kind === 'condition' ? UPDATE_FUNCTIONS : CONDITION_FUNCTIONS;
        throw validationException(
          other.has(fn)
            ? `Invalid ${this.kind === 'condition' ? 'ConditionExpression' : 'UpdateExpression'}: The function is not allowed in ${this.kind === 'condition' ? 'a condition' : 'an update'} expression; function: ${fn}`
            : `Invalid expression: Invalid function name; function: ${fn}`,
        );
      }
      return { kind: 'call', fn, args };
    }
    return { kind: 'path', path: this.path() };
  }

  /** A value of a SET action: an operand, or two joined by `+` / `-`. */
  setValue(): Operand {
    const left = this.operand();
    const op = this.peek();
    if (op === '+' || op === '-') {
      this.next();
      return { kind: 'arith', op, left, right: this.operand() };
    }
    return left;
  }

  path(): PathPart[] {
    const parts: PathPart[] = [this.#name()];
    for (;;) {
      if (this.peek() === '.') {
        this.next();
        parts.push(this.#name());
      } else if (this.peek() === '[') {
        this.next();
        const index = this.next();
        if (!/^\d+$/.test(index))
          throw validationException(`Invalid expression: list index ${index} in ${this.text}`);
        this.expect(']');
        parts.push(Number(index));
      } else {
        return parts;
      }
    }
  }

  #name(): string {
    const token = this.next();
    if (token.startsWith('#')) {
      const name = this.placeholders.names?.[token];
      if (name === undefined) {
        throw validationException(
          `Invalid expression: An expression attribute name used in the document path is not defined; attribute name: ${token}`,
        );
      }
      this.usedNames.add(token);
      this.reads.push({ kind: 'name', token, name });
      return name;
    }
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(token)) {
      throw validationException(`Invalid expression: unexpected ${token} in ${this.text}`);
    }
    if (DYNAMODB_RESERVED_WORDS.has(token.toUpperCase())) {
      throw validationException(
        `Invalid expression: Attribute name is a reserved keyword; reserved keyword: ${token} (use a #placeholder)`,
      );
    }
    return token;
  }
}

function checkValueDefined(placeholders: Placeholders, token: string): void {
  if (!(token in (placeholders.values ?? {}))) {
    throw validationException(
      `Invalid expression: An expression attribute value used in expression is not defined; attribute value: ${token}`,
    );
  }
}

/** DynamoDB refuses a BETWEEN whose given bounds (two values) are reversed, whatever the item holds. */
function checkBounds(placeholders: Placeholders, low: string, high: string): void {
  const lo = placeholders.values?.[low];
  const hi = placeholders.values?.[high];
  if (order(lo, hi) > 0) {
    throw validationException(
      `Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lowerBound: ${low}, upperBound: ${high}`,
    );
  }
}

/** The functions each kind of expression takes; DynamoDB refuses the other kind's. */
const CONDITION_FUNCTIONS = new Set([
  'attribute_exists',
  'attribute_not_exists',
  'attribute_type',
  'begins_with',
  'contains',
  'size',
]);
const UPDATE_FUNCTIONS = new Set(['if_not_exists', 'list_append']);

/** A parsed condition: `test(item)` evaluates it (item undefined: no such item). */
export function parseCondition(
  expression: string,
  placeholders: Placeholders,
): (item: Item | undefined) => boolean {
  const condition = cached('condition', expression, placeholders, (parser) => {
    const parsed = parser.condition();
    if (!parser.done())
      throw validationException(`Invalid ConditionExpression: unexpected ${parser.peek()} in ${expression}`);
    return parsed;
  });
  return (item) => evaluate(condition, item ?? {}, placeholders);
}

/** A parsed update: `apply(item)` returns the updated copy (the item created from its key when absent). */
export function parseUpdate(expression: string, placeholders: Placeholders): (item: Item) => Item {
  const actions = cached('update', expression, placeholders, updateActions);
  return (item) => applyUpdate(actions, item, placeholders);
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
  return actions;
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

type PlaceholderRead =
  | { readonly kind: 'name'; readonly token: string; readonly name: string }
  | { readonly kind: 'value'; readonly token: string }
  | { readonly kind: 'between'; readonly low: string; readonly high: string };

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
  const used = (token: string) => {
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

function evaluate(c: Condition, item: Item, p: Placeholders): boolean {
  switch (c.kind) {
    case 'and':
      return evaluate(c.left, item, p) && evaluate(c.right, item, p);
    case 'or':
      return evaluate(c.left, item, p) || evaluate(c.right, item, p);
    case 'not':
      return !evaluate(c.inner, item, p);
    case 'compare':
      return compare(c.op, value(c.left, item, p), value(c.right, item, p));
    case 'between': {
      const v = value(c.subject, item, p);
      return compare('>=', v, value(c.low, item, p)) && compare('<=', v, value(c.high, item, p));
    }
    case 'in': {
      const v = value(c.subject, item, p);
      return c.list.some((o) => compare('=', v, value(o, item, p)));
    }
    case 'fn':
      return callPredicate(c.call, item, p);
  }
}

function callPredicate(call: Operand & { kind: 'call' }, item: Item, p: Placeholders): boolean {
  const [first, second] = call.args;
  const arity = (n: number) => {
    if (call.args.length !== n)
      throw validationException(`Invalid expression: ${call.fn} takes ${n} operands`);
  };
  const pathOf = (o: Operand | undefined) => {
    if (o?.kind !== 'path')
      throw validationException(`Invalid expression: ${call.fn} needs a path as its first operand`);
    return o.path;
  };
  switch (call.fn) {
    case 'attribute_exists':
      arity(1);
      return read(item, pathOf(first)) !== undefined;
    case 'attribute_not_exists':
      arity(1);
      return read(item, pathOf(first)) === undefined;
    case 'attribute_type': {
      arity(2);
      const v = read(item, pathOf(first));
      return v !== undefined && typeOf(v) === value(second as Operand, item, p);
    }
    case 'begins_with': {
      arity(2);
      const v = read(item, pathOf(first));
      const prefix = value(second as Operand, item, p);
      if (typeof v === 'string' && typeof prefix === 'string') return v.startsWith(prefix);
      if (v instanceof Uint8Array && prefix instanceof Uint8Array) {
        return Buffer.from(v).subarray(0, prefix.length).equals(Buffer.from(prefix));
      }
      return false;
    }
    case 'contains': {
      arity(2);
      const v = read(item, pathOf(first));
      const needle = value(second as Operand, item, p);
      if (typeof v === 'string') return typeof needle === 'string' && v.includes(needle);
      if (v instanceof Set) return [...v].some((e) => isDeepStrictEqual(e, needle));
      if (Array.isArray(v)) return v.some((e) => isDeepStrictEqual(e, needle));
      return false;
    }
    default:
      throw validationException(`Invalid ConditionExpression: ${call.fn} is not a condition function`);
  }
}

function value(o: Operand, item: Item, p: Placeholders): unknown {
  switch (o.kind) {
    case 'value':
      return p.values?.[o.name];
    case 'path':
      return read(item, o.path);
    case 'arith': {
      const left = value(o.left, item, p);
      const right = value(o.right, item, p);
      if (!isDynamoNumber(left) || !isDynamoNumber(right)) {
        throw validationException(
          left === undefined || right === undefined
            ? 'The provided expression refers to an attribute that does not exist in the item'
            : 'An operand in the update expression has an incorrect data type',
        );
      }
      return addNumbers(left, right, o.op);
    }
    case 'call': {
      const [first, second] = o.args;
      if (o.fn === 'size') {
        const v = value(first as Operand, item, p);
        if (typeof v === 'string') return [...v].length;
        if (v instanceof Uint8Array) return v.length;
        if (v instanceof Set) return v.size;
        if (Array.isArray(v)) return v.length;
        if (isMap(v)) return Object.keys(v).length;
        return undefined;
      }
      if (o.fn === 'if_not_exists') {
        if (first?.kind !== 'path')
          throw validationException('Invalid UpdateExpression: if_not_exists needs a path');
        const v = read(item, first.path);
        return v === undefined ? value(second as Operand, item, p) : v;
      }
      if (o.fn === 'list_append') {
        const a = value(first as Operand, item, p);
        const b = value(second as Operand, item, p);
        if (!Array.isArray(a) || !Array.isArray(b)) {
          throw validationException('Invalid UpdateExpression: list_append takes two lists');
        }
        return [...a, ...b];
      }
      throw validationException(`Invalid expression: ${o.fn} is not allowed here`);
    }
  }
}

/** DynamoDB compares only values of one type (numbers, strings, bytes for order; any for `=`/`<>`). */
function compare(op: string, a: unknown, b: unknown): boolean {
  if (op === '=') return a !== undefined && b !== undefined && same(a, b);
  if (op === '<>') return !(a !== undefined && b !== undefined && same(a, b));
  const by = order(a, b);
  if (Number.isNaN(by)) return false;
  return op === '<' ? by < 0 : op === '<=' ? by <= 0 : op === '>' ? by > 0 : by >= 0;
}

/** Equal as DynamoDB sees it: a number and a bigint of one value are one N. */
function same(a: unknown, b: unknown): boolean {
  if (isDynamoNumber(a) && isDynamoNumber(b)) return compareNumbers(a, b) === 0;
  return isDeepStrictEqual(a, b);
}

/** The order of two values of one ordered type (numbers, strings, bytes); NaN for any other pair. */
function order(a: unknown, b: unknown): number {
  if (isDynamoNumber(a) && isDynamoNumber(b)) return compareNumbers(a, b);
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Buffer.compare(a, b);
  return Number.NaN;
}

function typeOf(v: unknown): string {
  if (typeof v === 'string') return 'S';
  if (typeof v === 'number' || typeof v === 'bigint') return 'N';
  if (typeof v === 'boolean') return 'BOOL';
  if (v === null) return 'NULL';
  if (v instanceof Uint8Array) return 'B';
  if (Array.isArray(v)) return 'L';
  if (v instanceof Set) {
    const first = v.values().next().value;
    return isDynamoNumber(first) ? 'NS' : first instanceof Uint8Array ? 'BS' : 'SS';
  }
  return 'M';
}

function isMap(v: unknown): v is Item {
  return (
    typeof v === 'object' &&
    v !== null &&
    !Array.isArray(v) &&
    !(v instanceof Set) &&
    !(v instanceof Uint8Array)
  );
}

function read(item: Item, path: readonly PathPart[]): unknown {
  let at: unknown = item;
  for (const part of path) {
    if (typeof part === 'number') at = Array.isArray(at) ? at[part] : undefined;
    else at = isMap(at) ? at[part] : undefined;
    if (at === undefined) return undefined;
  }
  return at;
}

function applyUpdate(actions: readonly UpdateAction[], original: Item, p: Placeholders): Item {
  const item = structuredClone(original);
  // Every value is computed from the item as it was before the update, as DynamoDB does.
  const planned = actions.map((a) => ({
    action: a,
    value: a.kind === 'remove' ? undefined : value(a.value, original, p),
  }));
  // List indices name the elements as they were too (AWS: REMOVE l[1], l[2] removes the second and
  // third): list elements are removed last, the highest index first, so no removal shifts another.
  const removesElement = (a: UpdateAction) => a.kind === 'remove' && typeof a.path.at(-1) === 'number';
  planned.sort((x, y) => {
    const [a, b] = [removesElement(x.action), removesElement(y.action)];
    return a && b ? comparePaths(y.action.path, x.action.path) : Number(a) - Number(b);
  });
  for (const { action, value: v } of planned) {
    const current = read(original, action.path);
    switch (action.kind) {
      case 'set':
        if (v === undefined)
          throw validationException(
            'The provided expression refers to an attribute that does not exist in the item',
          );
        write(item, action.path, v);
        break;
      case 'remove':
        write(item, action.path, undefined);
        break;
      case 'add':
        if (isDynamoNumber(v)) {
          if (current !== undefined && !isDynamoNumber(current)) {
            throw validationException('An operand in the update expression has an incorrect data type');
          }
          write(item, action.path, current === undefined ? v : addNumbers(current, v));
        } else if (v instanceof Set) {
          if (current !== undefined && !(current instanceof Set)) {
            throw validationException('An operand in the update expression has an incorrect data type');
          }
          write(item, action.path, new Set([...(current ?? []), ...v]));
        } else {
          throw validationException(
            'Incorrect operand type for operator or function; operator: ADD (a number or a set)',
          );
        }
        break;
      case 'delete': {
        if (!(v instanceof Set)) {
          throw validationException(
            'Incorrect operand type for operator or function; operator: DELETE (a set)',
          );
        }
        if (current === undefined) break;
        if (!(current instanceof Set))
          throw validationException('An operand in the update expression has an incorrect data type');
        const left = new Set([...current].filter((e) => ![...v].some((d) => isDeepStrictEqual(d, e))));
        // DynamoDB has no empty sets: removing the last element removes the attribute.
        write(item, action.path, left.size === 0 ? undefined : left);
        break;
      }
    }
  }
  return item;
}

/** Orders paths part by part (a missing part first), indices by number. */
function comparePaths(a: readonly PathPart[], b: readonly PathPart[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const [x, y] = [a[i], b[i]];
    if (x === y) continue;
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (typeof x === 'number' && typeof y === 'number') return x - y;
    return String(x) < String(y) ? -1 : 1;
  }
  return 0;
}

/** Writes (or, with `undefined`, removes) the value at `path`; the parent must exist, as in DynamoDB. */
function write(item: Item, path: readonly PathPart[], v: unknown): void {
  let parent: unknown = item;
  for (const part of path.slice(0, -1)) {
    parent =
      typeof part === 'number'
        ? Array.isArray(parent)
          ? parent[part]
          : undefined
        : isMap(parent)
          ? parent[part]
          : undefined;
    if (parent === undefined) {
      throw validationException('The document path provided in the update expression is invalid for update');
    }
  }
  const last = path[path.length - 1] as PathPart;
  if (typeof last === 'number') {
    if (!Array.isArray(parent))
      throw validationException('The document path provided in the update expression is invalid for update');
    if (v === undefined) parent.splice(last, 1);
    // Past the end appends, as DynamoDB does.
    else if (last >= parent.length) parent.push(v);
    else parent[last] = v;
    return;
  }
  if (!isMap(parent))
    throw validationException('The document path provided in the update expression is invalid for update');
  if (v === undefined) delete parent[last];
  else parent[last] = v;
}
