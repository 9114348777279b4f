// DynamoDB numbers are decimals of up to 38 significant digits, not binary floats: `SET n = n + :x` with
// 0.1 and 0.2 stores 0.3 there. lib-dynamodb sends a JS number as its shortest text (`String(n)`) and a
// bigint as its digits, and reads a number back as a JS number, or as a bigint when it is an integer past
// Number.MAX_SAFE_INTEGER. The arithmetic below is exact on those texts (a coefficient and a power of ten,
// in BigInt): only add, subtract and compare are needed, so a decimal library would be more to ship and
// keep than the few lines it saves.

import { validationException } from './dynamodb-errors.ts';

/** A number as DynamoDB holds it, in document form: a JS number, or a bigint (lib-dynamodb sends both). */
export type DynamoNumber = number | bigint;

/** `coefficient` × 10^`exponent`, with no trailing zeros in `coefficient` (zero: exponent 0). */
interface Decimal {
  readonly coefficient: bigint;
  readonly exponent: number;
}

const MAX_DIGITS = 38;
/** DynamoDB's range: magnitudes from 1E-130 up to (not including) 1E+126. */
const MIN_EXPONENT = -130;
const MAX_MAGNITUDE_EXPONENT = 126;

export function isDynamoNumber(v: unknown): v is DynamoNumber {
  return typeof v === 'number' || typeof v === 'bigint';
}

/** `a + b` or `a - b` as DynamoDB computes it, read back as lib-dynamodb reads it. */
export function addNumbers(a: DynamoNumber, b: DynamoNumber, op: '+' | '-' = '+'): DynamoNumber {
  // Safe integers with a safe sum (a version, a counter) are exact as they are: no decimals needed.
  if (typeof a === 'number' && typeof b === 'number' && Number.isSafeInteger(a) && Number.isSafeInteger(b)) {
    const sum = op === '+' ? a + b : a - b;
    if (Number.isSafeInteger(sum)) return sum === 0 ? 0 : sum;
  }
  const x = toDecimal(a);
  const y = toDecimal(b);
  const exponent = Math.min(x.exponent, y.exponent);
  const left = x.coefficient * 10n ** BigInt(x.exponent - exponent);
  const right = y.coefficient * 10n ** BigInt(y.exponent - exponent);
  return fromDecimal(normalize(op === '+' ? left + right : left - right, exponent));
}

/** Orders two numbers by value (1 and 1n are equal, as both are N 1 to DynamoDB). */
export function compareNumbers(a: DynamoNumber, b: DynamoNumber): number {
  // Two finite JS numbers order as their shortest texts do (each text lies within its own number's
  // rounding interval), -0 and 0 included: no decimals needed.
  if (typeof a === 'number' && typeof b === 'number' && Number.isFinite(a) && Number.isFinite(b)) {
    return a < b ? -1 : a > b ? 1 : 0;
  }
  const x = toDecimal(a);
  const y = toDecimal(b);
  const exponent = Math.min(x.exponent, y.exponent);
  const left = x.coefficient * 10n ** BigInt(x.exponent - exponent);
  const right = y.coefficient * 10n ** BigInt(y.exponent - exponent);
  return left < right ? -1 : left > right ? 1 : 0;
}

/** The number as DynamoDB's N text (plain digits, no exponent). */
export function numberText(v: DynamoNumber): string {
  return decimalText(toDecimal(v));
}

/**
 * DynamoDB's refusal of a number a request carries (its N text as sent) past its precision or range, in
 * the wording of a request's validation.
 */
export function checkNumberText(text: string): void {
  const match = /^[+-]?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!match) return; // the SDK sends only numbers it formatted
  const [, whole = '', fraction = '', power = '0'] = match;
  const d = normalize(BigInt(`${whole}${fraction}` || '0'), Number(power) - fraction.length);
  if (d.coefficient === 0n) return;
  const digits = d.coefficient.toString().replace('-', '').length;
  const refuse = (why: string) => {
    throw validationException(`1 validation error detected: ${why}`);
  };
  if (digits > MAX_DIGITS)
    refuse(`Attempting to store more than ${MAX_DIGITS} significant digits in a Number`);
  if (d.exponent + digits > MAX_MAGNITUDE_EXPONENT) {
    refuse('Number overflow. Attempting to store a number with magnitude larger than supported range');
  }
  if (d.exponent + digits - 1 < MIN_EXPONENT) {
    refuse('Number underflow. Attempting to store a number with magnitude smaller than supported range');
  }
}

function toDecimal(v: DynamoNumber): Decimal {
  if (typeof v === 'bigint') return normalize(v, 0);
  if (!Number.isFinite(v)) {
    // lib-dynamodb's own refusal, before anything is sent.
    throw new Error(`Special numeric value ${String(v)} is not allowed`);
  }
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(v));
  if (!match) throw new Error(`unexpected number text ${String(v)}`);
  const [, sign = '', whole = '', fraction = '', power = '0'] = match;
  return normalize(BigInt(`${sign}${whole}${fraction}`), Number(power) - fraction.length);
}

function normalize(coefficient: bigint, exponent: number): Decimal {
  if (coefficient === 0n) return { coefficient, exponent: 0 };
  let c = coefficient;
  let e = exponent;
  while (c % 10n === 0n) {
    c /= 10n;
    e += 1;
  }
  return { coefficient: c, exponent: e };
}

function decimalText({ coefficient, exponent }: Decimal): string {
  const negative = coefficient < 0n;
  const digits = (negative ? -coefficient : coefficient).toString();
  let text: string;
  if (exponent >= 0) text = digits + '0'.repeat(exponent);
  else if (-exponent < digits.length) text = `${digits.slice(0, exponent)}.${digits.slice(exponent)}`;
  else text = `0.${'0'.repeat(-exponent - digits.length)}${digits}`;
  return negative ? `-${text}` : text;
}

/** The result DynamoDB would store (or refuse), in the form lib-dynamodb reads it back. */
function fromDecimal(d: Decimal): DynamoNumber {
  const digits = (d.coefficient < 0n ? -d.coefficient : d.coefficient).toString();
  if (d.coefficient !== 0n) {
    if (digits.length > MAX_DIGITS) {
      throw validationException(
        `Attempting to store more than ${MAX_DIGITS} significant digits in a Number (the result has ${digits.length})`,
      );
    }
    if (d.exponent + digits.length > MAX_MAGNITUDE_EXPONENT) {
      throw validationException(
        'Number overflow. Attempting to store a number with magnitude larger than supported range',
      );
    }
    if (d.exponent + digits.length - 1 < MIN_EXPONENT) {
      throw validationException(
        'Number underflow. Attempting to store a number with magnitude smaller than supported range',
      );
    }
  }
  const text = decimalText(d);
  const num = Number(text);
  if (num > Number.MAX_SAFE_INTEGER || num < Number.MIN_SAFE_INTEGER) {
    if (d.exponent < 0) {
      // lib-dynamodb's own answer when such a number is read back.
      throw new Error(`${text} can't be converted to BigInt. Set options.wrapNumbers to get string value.`);
    }
    return BigInt(text);
  }
  return num;
}
