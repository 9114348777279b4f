// Evaluates parsed DynamoDB expressions (dynamodb-expression-parser.ts) over in-memory items in document
// form: conditions, operands and functions, and update actions, as DynamoDB applies them.

import { isDeepStrictEqual } from 'node:util';
import { validationException } from './dynamodb-errors.ts';
import type {
  Condition,
  Item,
  Operand,
  PathPart,
  Placeholders,
  UpdateAction,
} from './dynamodb-expression-types.ts';
import { addNumbers, compareNumbers, isDynamoNumber } from './dynamodb-numbers.ts';

export function checkValueDefined(placeholders: Placeholders, token: string): void {
  if (!(token in (placeholders.values ?? {}))) {
    throw validationException(
      `Invalid expression: An expression attribute value used in expression is not defined; attribute value: ${token}`,
    );
  }
}

/** DynamoDB refuses a BETWEEN whose given bounds (two values) are reversed, whatever the item holds. */
export function checkBounds(placeholders: Placeholders, low: string, high: string): void {
  const lo = placeholders.values?.[low];
  const hi = placeholders.values?.[high];
  if (order(lo, hi) > 0) {
    throw validationException(
      `Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lowerBound: ${low}, upperBound: ${high}`,
    );
  }
}

export function evaluate(c: Condition, item: Item, p: Placeholders): boolean {
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
        if (a === undefined || b === undefined) {
          throw validationException(
            'The provided expression refers to an attribute that does not exist in the item',
          );
        }
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
export function order(a: unknown, b: unknown): number {
  if (isDynamoNumber(a) && isDynamoNumber(b)) return compareNumbers(a, b);
  if (typeof a === 'string' && typeof b === 'string') return compareStrings(a, b);
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Buffer.compare(a, b);
  return Number.NaN;
}

/**
 * Strings in DynamoDB's order, their UTF-8 bytes' (code points'): JS's `<` orders UTF-16 units, which
 * puts a surrogate pair (U+10000 and up) before U+E000..U+FFFF.
 */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

/** A UTF-16 unit's rank in code point order: surrogates after every other BMP unit. */
function codePointRank(unit: number): number {
  return unit >= 0xe000 ? unit - 0x800 : unit >= 0xd800 ? unit + 0x2000 : unit;
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

export function applyUpdate(actions: readonly UpdateAction[], original: Item, p: Placeholders): Item {
  // Copy on write: the top level now, a nested map or list only when a path writes into it, so the
  // original stays as it was (the refusal's and ReturnValues' old item) without a deep clone per update.
  const item: Item = { ...original };
  const fresh = new WeakSet<object>([item]);
  // Every value is computed from the item as it was before the update, as DynamoDB does.
  const planned = actions.map((a) => ({
    action: a,
    value: a.kind === 'remove' ? undefined : value(a.value, original, p),
  }));
  // List indices name the elements as they were too (AWS: REMOVE l[1], l[2] removes the second and
  // third): list elements are removed last, the highest index first, so no removal shifts another.
  const removesElement = (a: UpdateAction) => a.kind === 'remove' && typeof a.path.at(-1) === 'number';
  if (actions.some(removesElement)) {
    planned.sort((x, y) => {
      const [a, b] = [removesElement(x.action), removesElement(y.action)];
      return a && b ? comparePaths(y.action.path, x.action.path) : Number(a) - Number(b);
    });
  }
  for (const { action, value: v } of planned) {
    const current =
      action.kind === 'add' || action.kind === 'delete' ? read(original, action.path) : undefined;
    switch (action.kind) {
      case 'set':
        if (v === undefined)
          throw validationException(
            'The provided expression refers to an attribute that does not exist in the item',
          );
        write(item, action.path, v, fresh);
        break;
      case 'remove':
        write(item, action.path, undefined, fresh);
        break;
      case 'add':
        if (isDynamoNumber(v)) {
          if (current !== undefined && !isDynamoNumber(current)) {
            throw validationException('An operand in the update expression has an incorrect data type');
          }
          write(item, action.path, current === undefined ? v : addNumbers(current, v), fresh);
        } else if (v instanceof Set) {
          if (current !== undefined && !(current instanceof Set)) {
            throw validationException('An operand in the update expression has an incorrect data type');
          }
          write(item, action.path, new Set([...(current ?? []), ...v]), fresh);
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
        write(item, action.path, left.size === 0 ? undefined : left, fresh);
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

/**
 * Writes (or, with `undefined`, removes) the value at `path`; the parent must exist, as in DynamoDB. Each
 * map or list on the way that is not `fresh` (this update's own copy) is copied first, into its parent.
 */
function write(item: Item, path: readonly PathPart[], v: unknown, fresh: WeakSet<object>): void {
  let parent: unknown = item;
  for (let i = 0; i < path.length - 1; i++) {
    const part = path[i] as PathPart;
    let child: unknown =
      typeof part === 'number'
        ? Array.isArray(parent)
          ? parent[part]
          : undefined
        : isMap(parent)
          ? parent[part]
          : undefined;
    if (child === undefined) {
      throw validationException('The document path provided in the update expression is invalid for update');
    }
    if (typeof child === 'object' && child !== null && !fresh.has(child)) {
      if (Array.isArray(child)) child = [...child];
      else if (isMap(child)) child = { ...child };
      if (Array.isArray(child) || isMap(child)) {
        fresh.add(child);
        (parent as Record<string | number, unknown>)[part] = child;
      }
    }
    parent = child;
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
