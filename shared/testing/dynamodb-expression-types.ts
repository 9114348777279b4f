// The parsed form of DynamoDB's condition and update expressions (dynamodb-expressions.ts), shared by the
// parser and the evaluator.

export type Item = Record<string, unknown>;

/** Placeholders of one expression: `#name` -> attribute name, `:value` -> value. */
export interface Placeholders {
  readonly names?: Readonly<Record<string, string>> | undefined;
  readonly values?: Readonly<Record<string, unknown>> | undefined;
}

export type PathPart = string | number;
export type Operand =
  | { readonly kind: 'path'; readonly path: readonly PathPart[] }
  | { readonly kind: 'value'; readonly name: string }
  | { readonly kind: 'call'; readonly fn: string; readonly args: readonly Operand[] }
  | { readonly kind: 'arith'; readonly op: '+' | '-'; readonly left: Operand; readonly right: Operand };
export type Condition =
  | { readonly kind: 'and' | 'or'; readonly left: Condition; readonly right: Condition }
  | { readonly kind: 'not'; readonly inner: Condition }
  | { readonly kind: 'compare'; readonly op: string; readonly left: Operand; readonly right: Operand }
  | { readonly kind: 'between'; readonly subject: Operand; readonly low: Operand; readonly high: Operand }
  | { readonly kind: 'in'; readonly subject: Operand; readonly list: readonly Operand[] }
  | { readonly kind: 'fn'; readonly call: Operand & { kind: 'call' } };
export type UpdateAction =
  | { readonly kind: 'set'; readonly path: readonly PathPart[]; readonly value: Operand }
  | { readonly kind: 'remove'; readonly path: readonly PathPart[] }
  | { readonly kind: 'add' | 'delete'; readonly path: readonly PathPart[]; readonly value: Operand };

/** What a parse read of its placeholders, in order (see `cached` in dynamodb-expressions.ts). */
export type PlaceholderRead =
  | { readonly kind: 'name'; readonly token: string; readonly name: string }
  | { readonly kind: 'value'; readonly token: string }
  | { readonly kind: 'between'; readonly low: string; readonly high: string };
