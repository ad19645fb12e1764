/**
 * Money is integer nano-USD (1e-9 USD) inside the system; decimal USD exists only at the API
 * edge. Conversions go through decimal strings, never through floating-point arithmetic.
 */
export type Nano = bigint;

const NANO_PER_USD = 1_000_000_000n;
const DECIMALS = 9;

/**
 * The largest amount the service records: $1,000,000,000. Read models keep nano-USD in
 * PostgreSQL `bigint` (at most ~9.2e18, $9.2 billion), so a credit, limit or balance up to this
 * bound, and the sum of any few of them, always fits; an amount above it is refused before it
 * can become an event no projection could store.
 */
export const MAX_AMOUNT_USD = 1_000_000_000;
export const MAX_AMOUNT_NANO: Nano = BigInt(MAX_AMOUNT_USD) * NANO_PER_USD;

/**
 * Parses a USD amount ("10", "0.15", 0.000002, "1e-7") into nano-USD. Refuses more precision
 * than a nano, negatives are allowed only when `allowNegative` is set.
 */
export function usdToNano(value: string | number, { allowNegative = false } = {}): Nano {
  const text = typeof value === 'number' ? numberToPlainString(value) : value.trim();
  const m = /^(-)?(\d+)(?:\.(\d+))?$/.exec(text);
  if (!m) throw new RangeError(`not a USD amount: ${JSON.stringify(value)}`);
  const [, sign, whole, fraction = ''] = m;
  const digits = fraction.replace(/0+$/, '');
  if (digits.length > DECIMALS) throw new RangeError(`more precise than a nano-USD: ${text}`);
  const nano = BigInt(whole) * NANO_PER_USD + BigInt(digits.padEnd(DECIMALS, '0') || '0');
  if (sign && nano !== 0n && !allowNegative) throw new RangeError(`negative USD amount: ${text}`);
  return sign ? -nano : nano;
}

function numberToPlainString(n: number): string {
  if (!Number.isFinite(n)) throw new RangeError(`not a USD amount: ${n}`);
  // toFixed(20) would expose binary noise (0.1 -> 0.1000000000000000055511); the shortest
  // round-trip repr is what the caller meant, so expand its exponent form by hand.
  const s = String(n);
  const e = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(s);
  if (!e) return s;
  const [, sign, lead, rest = '', expText] = e;
  const exp = Number(expText);
  const digits = lead + rest;
  if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  return `${sign}${digits.padEnd(exp + 1, '0')}`;
}

/** Exact decimal string of a nano amount: 1500000000n -> "1.5". */
export function nanoToUsdString(nano: Nano): string {
  const negative = nano < 0n;
  const abs = negative ? -nano : nano;
  const whole = abs / NANO_PER_USD;
  const fraction = (abs % NANO_PER_USD).toString().padStart(DECIMALS, '0').replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

/**
 * USD as a JSON number for API responses. Exact for every amount below 10^6 USD (15
 * significant digits), which is the range a prepaid balance lives in.
 */
export function nanoToUsd(nano: Nano): number {
  return Number(nanoToUsdString(nano));
}

/** Ceiling division for non-negative amounts: prices never round in the caller's favour by more than a nano. */
export function ceilDiv(a: bigint, b: bigint): bigint {
  if (a < 0n || b <= 0n) throw new RangeError('ceilDiv expects a >= 0 and b > 0');
  return (a + b - 1n) / b;
}

/** USD with exactly 9 decimals, for documents (statements, exports): 1500000000n -> "1.500000000", -5n -> "-0.000000005". */
export function nanoToUsd9(nano: Nano): string {
  const abs = nano < 0n ? -nano : nano;
  return `${nano < 0n ? '-' : ''}${abs / 1_000_000_000n}.${(abs % 1_000_000_000n).toString().padStart(9, '0')}`;
}
