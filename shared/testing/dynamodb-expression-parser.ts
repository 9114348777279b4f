// The parser of DynamoDB's condition and update expressions: tokens, operands, paths and placeholders,
// refusing with a ValidationException what DynamoDB refuses (reserved words, undefined values, the other
// kind's functions).

import { validationException } from './dynamodb-errors.ts';
import { checkBounds, checkValueDefined } from './dynamodb-expression-eval.ts';
import type {
  Condition,
  Operand,
  PathPart,
  PlaceholderRead,
  Placeholders,
} from './dynamodb-expression-types.ts';
import { DYNAMODB_RESERVED_WORDS } from './dynamodb-reserved-words.ts';

const TOKEN = /\s*(#[A-Za-z0-9_]+|:[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*|\d+|<>|<=|>=|[=<>(),.[\]+-])/y;

export class Parser {
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
