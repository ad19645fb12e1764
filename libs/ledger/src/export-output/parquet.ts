import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { EXPORT_COLUMNS, type MoneyRow } from '../export';
import { writeAll, type Sink } from './sinks';

export const DEFAULT_ROW_GROUP_ROWS = 50_000;

/** hyparquet-writer's byte writer, emptied into the file as it fills (not the whole file in memory). */
class FdByteWriter extends ByteWriter {
  private static readonly FLUSH_AT = 1 << 20;

  constructor(private readonly fd: number) {
    super(FdByteWriter.FLUSH_AT * 2);
  }

  override ensure(size: number): void {
    // Everything before `index` is complete output: it can go to the file before more is appended.
    if (this.index > FdByteWriter.FLUSH_AT) this.flush();
    super.ensure(size);
  }

  flush(): void {
    if (this.index === 0) return;
    writeAll(this.fd, new Uint8Array(this.buffer, 0, this.index));
    this.index = 0;
  }

  override finish(): void {
    this.flush();
  }
}

const utf8 = (name: string, required = false) => ({
  name,
  type: 'BYTE_ARRAY' as const,
  converted_type: 'UTF8' as const,
  repetition_type: required ? ('REQUIRED' as const) : ('OPTIONAL' as const),
});
/** Exact money: nano-USD as an INT64 DECIMAL(18, 9), which Spark, DuckDB, pandas and BigQuery read as decimal USD. */
const usdDecimal = (name: string, required: boolean) => ({
  name,
  type: 'INT64' as const,
  converted_type: 'DECIMAL' as const,
  scale: 9,
  precision: 18,
  logical_type: { type: 'DECIMAL' as const, scale: 9, precision: 18 },
  repetition_type: required ? ('REQUIRED' as const) : ('OPTIONAL' as const),
});

/** The Parquet schema: the export's columns, amounts as decimals, meters as a JSON column. */
export const PARQUET_SCHEMA = [
  { name: 'root', num_children: EXPORT_COLUMNS.length },
  ...EXPORT_COLUMNS.map((column) => {
    switch (column) {
      case 'position':
      case 'type':
      case 'account_id':
        return utf8(column, true);
      case 'amount_usd':
      case 'balance_effect_usd':
        return usdDecimal(column, true);
      case 'provider_cost_usd':
        return usdDecimal(column, false);
      case 'byok':
      case 'batch':
        return { name: column, type: 'BOOLEAN' as const, repetition_type: 'OPTIONAL' as const };
      case 'meters':
        return { name: column, type: 'BYTE_ARRAY' as const, converted_type: 'JSON' as const, repetition_type: 'OPTIONAL' as const };
      default:
        return utf8(column);
    }
  }),
];

const NANO_COLUMN: Partial<Record<(typeof EXPORT_COLUMNS)[number], keyof MoneyRow>> = {
  amount_usd: 'amount_nano',
  balance_effect_usd: 'balance_effect_nano',
  provider_cost_usd: 'provider_cost_nano',
};

/** What hyparquet-writer keeps between row groups; restored on a resume. */
export type ParquetState = { row_groups: unknown[]; pendingIndexes: unknown[]; num_rows: bigint };

export class ParquetSink implements Sink {
  private readonly bytesWriter: FdByteWriter;
  private readonly parquet: ParquetWriter;
  private buffered: MoneyRow[] = [];

  constructor(
    fd: number,
    private readonly rowGroupRows: number,
    resume: { bytes: number; state: ParquetState } | null,
  ) {
    this.bytesWriter = new FdByteWriter(fd);
    this.parquet = new ParquetWriter({ writer: this.bytesWriter, schema: PARQUET_SCHEMA as never, createdBy: 'svc-gateway ledger export' });
    if (resume) {
      // The constructor appended the "PAR1" magic, which the file already has.
      this.bytesWriter.index = 0;
      this.bytesWriter.offset = resume.bytes;
      const internals = this.parquet as unknown as ParquetState;
      internals.row_groups = resume.state.row_groups;
      internals.pendingIndexes = resume.state.pendingIndexes;
      internals.num_rows = resume.state.num_rows;
    } else this.bytesWriter.flush();
  }

  get bytes(): number {
    return this.bytesWriter.offset;
  }

  async add(rows: MoneyRow[]): Promise<boolean> {
    for (const row of rows) this.buffered.push(row);
    if (this.buffered.length < this.rowGroupRows) return this.buffered.length === 0;
    await this.writeGroup();
    return true;
  }

  private async writeGroup(): Promise<void> {
    const rows = this.buffered;
    if (rows.length === 0) return;
    this.buffered = [];
    const columnData = EXPORT_COLUMNS.map((column) => {
      const nanoField = NANO_COLUMN[column];
      const data = nanoField ? rows.map((r) => r[nanoField]) : rows.map((r) => r[column]);
      // min/max of a JSON document prune nothing, and are kept whole (no truncation): skip them.
      return { name: column, data, ...(column === 'meters' ? { statistics: false } : {}) };
    });
    await this.parquet.write({ columnData: columnData as never, rowGroupSize: rows.length });
    this.bytesWriter.flush();
  }

  state(): ParquetState {
    const internals = this.parquet as unknown as ParquetState;
    return { row_groups: internals.row_groups, pendingIndexes: internals.pendingIndexes, num_rows: internals.num_rows };
  }

  async drain(): Promise<void> {
    await this.writeGroup();
  }

  async finish(): Promise<void> {
    await this.writeGroup();
    await this.parquet.finish();
  }
}
