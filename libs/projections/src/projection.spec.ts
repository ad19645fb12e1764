import type { SqlRunner } from '@svc/platform';
import { freshPgRunner } from '@svc/platform/testing/pg';
import { memoryPglite } from '@svc/platform/testing/pglite';
import { asTable, utcDay } from './projection';

describe('utcDay: the UTC day of an instant, what (t AT TIME ZONE UTC)::date gives', () => {
  it('given an instant written by toISOString, then its day in UTC', () => {
    expect(utcDay('2026-12-02T23:59:59.999Z')).toBe('2026-12-02');
    expect(utcDay('2026-12-03T00:00:00.000Z')).toBe('2026-12-03');
  });

  it('given an instant with an offset, then the day in UTC, not the local one', () => {
    expect(utcDay('2026-03-01T01:30:00.000+02:00')).toBe('2026-02-28');
    expect(utcDay('2026-02-28T23:30:00-02:00')).toBe('2026-03-01');
  });

  it('given any instant, then the same day as a Date parsed and printed in UTC', () => {
    for (let ms = Date.parse('2024-02-27T00:00:00Z'); ms < Date.parse('2024-03-02T00:00:00Z'); ms += 3_599_999) {
      const iso = new Date(ms).toISOString();
      expect(utcDay(iso)).toBe(iso.slice(0, 10));
      // Without milliseconds, or with an offset of zero written out, it is parsed: the same day.
      expect(utcDay(iso.replace(/\.\d{3}Z$/, 'Z'))).toBe(iso.slice(0, 10));
      expect(utcDay(iso.replace('Z', '+00:00'))).toBe(iso.slice(0, 10));
    }
  });
});

describe.each([
  ['PostgreSQL', () => freshPgRunner('astable')],
  ['PGlite', () => memoryPglite()],
])('asTable on %s: a batch of rows as one parameter, read back as a table', (_name, open) => {
  let sql: SqlRunner;
  beforeAll(async () => {
    sql = await open();
    await sql.exec(`CREATE TABLE IF NOT EXISTS as_table_rows (t text, i integer, b bigint, ok boolean, at timestamptz, d date, j jsonb)`);
  }, 60_000);
  afterAll(() => sql?.close());
  beforeEach(() => sql.exec('TRUNCATE as_table_rows'));

  const TYPES = ['text', 'integer', 'bigint', 'boolean', 'timestamptz', 'date', 'jsonb'];
  const back = async () =>
    (
      await sql.query<Record<string, unknown>>(
        `SELECT t, i, b::text AS b, ok, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at, d::text AS d, j FROM as_table_rows ORDER BY i`,
      )
    ).rows;

  it('keeps every value as it was: text a PostgreSQL array literal would have to escape, integers past 2^53, nulls, nested JSON', async () => {
    const tricky = `a "quoted", {braced} \\ back\\slash 'single' NULL ünïcødé 🙂 tab\tnewline\n`;
    const c = asTable(TYPES, [
      [tricky, 1, '9223372036854775807', true, '2026-12-02T23:59:59.999Z', '2026-12-02', { meter: 'tokens', lines: [{ amount_nano: '12' }] }],
      ['', 2, '-9007199254740993', false, '2026-03-01T01:30:00.000+02:00', '2024-02-29', [1, 'two', null]],
      [null, 3, null, null, null, null, null],
      ['NULL', 4, '0', true, '2026-01-01T00:00:00.000Z', '2026-01-01', '{"already":"text"}'],
    ]);
    expect(c.params).toHaveLength(1);
    await sql.query(`INSERT INTO as_table_rows (t, i, b, ok, at, d, j) SELECT * FROM ${c.table} AS d`, c.params);
    expect(await back()).toEqual([
      {
        t: tricky,
        i: 1,
        b: '9223372036854775807',
        ok: true,
        at: '2026-12-02T23:59:59.999Z',
        d: '2026-12-02',
        j: { meter: 'tokens', lines: [{ amount_nano: '12' }] },
      },
      { t: '', i: 2, b: '-9007199254740993', ok: false, at: '2026-02-28T23:30:00.000Z', d: '2024-02-29', j: [1, 'two', null] },
      { t: null, i: 3, b: null, ok: null, at: null, d: null, j: null },
      { t: 'NULL', i: 4, b: '0', ok: true, at: '2026-01-01T00:00:00.000Z', d: '2026-01-01', j: { already: 'text' } },
    ]);
  });

  it('names its columns for a join or an update, and reads no row from an empty batch', async () => {
    const c = asTable(
      ['integer', 'text'],
      [
        [2, 'two'],
        [1, 'one'],
      ],
    );
    await sql.query(`INSERT INTO as_table_rows (i, t) SELECT n, name FROM ${c.table} AS d(n, name) WHERE n > 1`, c.params);
    expect((await back()).map((r) => [r.i, r.t])).toEqual([[2, 'two']]);
    const none = asTable(['integer', 'text'], []);
    await sql.query(`INSERT INTO as_table_rows (i, t) SELECT * FROM ${none.table} AS d`, none.params);
    expect(await back()).toHaveLength(1);
  });

  it('refuses a value its column cannot hold, writing nothing', async () => {
    const c = asTable(
      ['text', 'integer'],
      [
        ['fine', 1],
        ['not a number', 'x'],
      ],
    );
    await expect(sql.query(`INSERT INTO as_table_rows (t, i) SELECT * FROM ${c.table} AS d`, c.params)).rejects.toThrow();
    expect(await back()).toEqual([]);
  });
});
