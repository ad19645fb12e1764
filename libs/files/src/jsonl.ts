import { DomainError } from '@svc/platform';

/** OpenAI's limit on the requests of a batch input file; the smaller batch limit (spec 8) is the batch's to check. */
export const MAX_JSONL_LINES = 50_000;

/**
 * A line is one request body, and a request body is at most 10 MB (spec 8): a longer line could
 * never run, and holding it whole is the only memory reading takes.
 */
export const MAX_JSONL_LINE_BYTES = 10 * 1024 * 1024;

export interface JsonlLine {
  /** 1-based, counting empty lines. */
  line: number;
  value: Record<string, unknown>;
}

/**
 * JSONL as it streams in, chunk by chunk: every line a JSON object, empty lines only at the
 * end. Lines are split on the byte `\n`, which never occurs inside a multi-byte UTF-8
 * character, so a line may span any number of chunks. A refusal is a 400 naming `file` and the
 * 1-based line number. The upload check and the batches' reading of a stored file are the same.
 */
export class JsonlReader {
  // A byte order mark stays in the text, and fails line 1 as JSON.parse would.
  private readonly decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  private line = 1;
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private requests = 0;
  /** The first empty line: only more empty lines may follow it. */
  private emptyLine: number | null = null;

  /** The lines `piece` completes. */
  push(piece: Buffer): JsonlLine[] {
    const lines: JsonlLine[] = [];
    let start = 0;
    for (let newline = piece.indexOf(0x0a); newline !== -1; newline = piece.indexOf(0x0a, start)) {
      this.take(piece.subarray(start, newline));
      this.finishLine(lines);
      start = newline + 1;
    }
    this.take(piece.subarray(start));
    return lines;
  }

  /** The input is complete: the last line needs no `\n`, and there must be at least one request. */
  end(): JsonlLine[] {
    const lines: JsonlLine[] = [];
    if (this.partialBytes > 0) this.finishLine(lines);
    if (this.requests === 0) throw DomainError.invalid('The file has no lines: a batch input file holds one JSON request per line.', 'file', 'empty_file');
    return lines;
  }

  private take(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.partialBytes += bytes.length;
    if (this.partialBytes > MAX_JSONL_LINE_BYTES) throw this.refuse(`is longer than ${MAX_JSONL_LINE_BYTES / 1024 / 1024} MB, the most a request body may be`);
    this.partial.push(bytes);
  }

  private finishLine(lines: JsonlLine[]): void {
    const bytes = Buffer.concat(this.partial, this.partialBytes);
    this.partial = [];
    this.partialBytes = 0;
    let text: string;
    try {
      text = this.decoder.decode(bytes);
    } catch {
      throw this.refuse('is not valid UTF-8');
    }
    if (text.trim() === '') {
      this.emptyLine ??= this.line;
    } else {
      if (this.emptyLine !== null) throw this.refuse('is empty; empty lines are allowed only at the end of the file', this.emptyLine);
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (err) {
        throw this.refuse(`is not valid JSON (${(err as Error).message})`);
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) throw this.refuse('is not a JSON object');
      if (++this.requests > MAX_JSONL_LINES)
        throw DomainError.invalid(
          `The file has more than ${MAX_JSONL_LINES.toLocaleString('en-US')} lines, the most a batch input file may hold.`,
          'file',
          'too_many_lines',
        );
      lines.push({ line: this.line, value: value as Record<string, unknown> });
    }
    this.line++;
  }

  private refuse(problem: string, line = this.line): DomainError {
    return DomainError.invalid(`Line ${line} of the file ${problem}: a batch input file holds one JSON object per line (JSONL).`, 'file', 'invalid_json_line');
  }
}

/** Each request of a JSONL stream (a stored batch file's `content`), in order, read a chunk at a time. */
export async function* readJsonl(chunks: AsyncIterable<Buffer>): AsyncIterable<JsonlLine> {
  const reader = new JsonlReader();
  for await (const chunk of chunks) yield* reader.push(chunk);
  yield* reader.end();
}
