import { writeSync } from 'node:fs';
import { csvLine, jsonlLine, type MoneyRow } from '../export';

export interface Sink {
  /** Takes a page's rows; true when every row taken so far is written out. */
  add(rows: MoneyRow[]): Promise<boolean>;
  /** Bytes of the file written out (what a checkpoint records). */
  readonly bytes: number;
  /** What a checkpoint needs besides the length (Parquet: the row groups' metadata). */
  state(): unknown;
  /** Writes out what is buffered (Parquet: the last row group). */
  drain(): Promise<void>;
  /** Ends the file (Parquet: the footer). */
  finish(): Promise<void>;
}

const lineOf = (format: 'csv' | 'jsonl') => (format === 'csv' ? csvLine : jsonlLine);

/** CSV or JSON lines into a file descriptor: a page is one write. */
export class TextFileSink implements Sink {
  constructor(
    private readonly fd: number,
    private readonly format: 'csv' | 'jsonl',
    public bytes: number,
  ) {}

  async add(rows: MoneyRow[]): Promise<boolean> {
    if (rows.length === 0) return true;
    const line = lineOf(this.format);
    let text = '';
    for (const row of rows) text += line(row);
    this.bytes += writeAll(this.fd, Buffer.from(text, 'utf8'));
    return true;
  }

  state(): unknown {
    return null;
  }

  async drain(): Promise<void> {}

  async finish(): Promise<void> {}
}

export class StreamSink implements Sink {
  bytes = 0;
  constructor(
    private readonly stream: NodeJS.WritableStream,
    private readonly format: 'csv' | 'jsonl',
  ) {}

  async add(rows: MoneyRow[]): Promise<boolean> {
    if (rows.length === 0) return true;
    const line = lineOf(this.format);
    let text = '';
    for (const row of rows) text += line(row);
    await this.write(text);
    return true;
  }

  async write(text: string): Promise<void> {
    this.bytes += Buffer.byteLength(text);
    // Resolves once the chunk is handed to the OS, which is what "flushed" means for a pipe.
    await new Promise<void>((resolve, reject) => this.stream.write(text, (err) => (err ? reject(err) : resolve())));
  }

  state(): unknown {
    return null;
  }

  async drain(): Promise<void> {}

  async finish(): Promise<void> {}
}

export function writeAll(fd: number, buffer: Uint8Array): number {
  for (let done = 0; done < buffer.length;) done += writeSync(fd, buffer, done, buffer.length - done);
  return buffer.length;
}
