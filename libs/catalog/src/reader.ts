import { usdToNano, type Nano } from '@svc/platform';
import { CatalogError } from './types';

/** A time zone is required: a sunset must mean the same instant on every server. */
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/**
 * The checks every part of a catalog document is read with. Each failure is a CatalogError that
 * names the file and the place in it (`models[2].pricing.input`).
 */
export class CatalogReader {
  constructor(private readonly source: string) {}

  fail(where: string, what: string): never {
    throw new CatalogError(`${this.source}: ${where}: ${what}`);
  }

  obj(v: unknown, where: string): Record<string, unknown> {
    return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date)
      ? (v as Record<string, unknown>)
      : this.fail(where, 'expected a mapping');
  }

  // Unknown fields are refused: a misspelt optional field (`deprecaton:`) would otherwise vanish.
  fields(v: unknown, where: string, known: string[]): Record<string, unknown> {
    const o = this.obj(v, where);
    for (const key of Object.keys(o)) {
      if (!known.includes(key)) this.fail(`${where}.${key}`, `unknown field (known: ${known.join(', ')})`);
    }
    return o;
  }

  str(v: unknown, where: string): string {
    return typeof v === 'string' && v.length > 0 ? v : this.fail(where, 'expected a non-empty string');
  }

  bool(v: unknown, where: string): boolean {
    return typeof v === 'boolean' ? v : this.fail(where, 'expected true or false');
  }

  oneOf<T extends string>(v: unknown, where: string, allowed: readonly T[]): T {
    return allowed.includes(v as T) ? (v as T) : this.fail(where, `expected one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
  }

  list<T>(v: unknown, where: string, item: (x: unknown, where: string) => T): T[] {
    if (!Array.isArray(v)) return this.fail(where, 'expected a list');
    const items = v.map((x, i) => item(x, `${where}[${i}]`));
    if (new Set(items).size !== items.length) this.fail(where, 'lists an entry twice');
    return items;
  }

  date(v: unknown, where: string): Date {
    if (v instanceof Date && !Number.isNaN(v.getTime())) return v; // a YAML 1.1 timestamp
    const m = typeof v === 'string' ? ISO_DATE_TIME.exec(v) : null;
    const at = m ? Date.parse(m[0]) : NaN;
    // Date.parse rolls 2026-02-30 over into March: the calendar date must exist as written.
    const day = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))).toISOString().slice(0, 10) : '';
    if (!m || Number.isNaN(at) || day !== m[0].slice(0, 10)) {
      return this.fail(where, `expected an ISO 8601 date-time with a time zone such as 2026-12-01T00:00:00Z, got ${JSON.stringify(v)}`);
    }
    return new Date(at);
  }

  usd(v: unknown, where: string, unit: string): Nano {
    try {
      return usdToNano(typeof v === 'number' ? v : this.str(v, where));
    } catch {
      return this.fail(where, `expected a USD price ${unit}, got ${JSON.stringify(v)}`);
    }
  }

  percent(v: unknown, where: string): number {
    return Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 100 ? (v as number) : this.fail(where, 'expected a whole percentage from 0 to 100');
  }
}
