import { START, type Position } from '@svc/eventstore';
import type { SqlExecutor } from '@svc/platform';

/**
 * Moves the checkpoints of `names` from `from` to `to`, each only if it is still at `from`;
 * returns those it moved. Inside a batch's transaction it is the first statement, so its row
 * lock keeps other runners out until the batch commits. `applying`: those the batch holds
 * events of, whose count of changes goes up.
 */
export async function moveCheckpoints(sql: SqlExecutor, names: string[], from: Position, to: Position, applying: readonly string[] = []): Promise<string[]> {
  // The rows are locked in name order: two runners moving overlapping sets never deadlock.
  const { rows } = await sql.query<{ name: string }>(
    `UPDATE projection_checkpoints SET position = $3, updated_at = now(),
        changes = changes + CASE WHEN name = ANY($4::text[]) THEN 1 ELSE 0 END
      WHERE name IN (SELECT name FROM projection_checkpoints WHERE name = ANY($1::text[]) AND position = $2 ORDER BY name FOR UPDATE)
        AND position = $2
      RETURNING name`,
    [names, from, to, applying],
  );
  return rows.map((r) => r.name);
}

/** Every checkpoint as the database holds it now. */
export async function readCheckpoints(sql: SqlExecutor): Promise<Map<string, Position>> {
  const { rows } = await sql.query<{ name: string; position: string }>('SELECT name, position FROM projection_checkpoints');
  return new Map(rows.map((r) => [r.name, r.position]));
}

/**
 * A runner's own view of the checkpoints: each read from the database once, then moved along
 * with the batches it applies. Those watching (waitFor) are told whenever one moves.
 */
export class CheckpointCache {
  private readonly local = new Map<string, Position>();
  private readonly advanced = new Set<() => void>();

  constructor(private readonly sql: SqlExecutor) {}

  /** The checkpoints known here; one not read yet is missing. */
  get known(): ReadonlyMap<string, Position> {
    return this.local;
  }

  async of(name: string): Promise<Position> {
    const known = this.local.get(name);
    if (known !== undefined) return known;
    const { rows } = await this.sql.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1', [name]);
    const position = rows[0]?.position ?? START;
    this.advance(name, position);
    return position;
  }

  settle(name: string, committed: boolean, to: Position): void {
    if (committed) this.advance(name, to);
    // Another runner (or a rebuild) moved the checkpoint since we read it: the batch is dropped,
    // and the next step reads where the other runner left it.
    else this.local.delete(name);
  }

  /** Where a rebuild left `name`; watchers are not told. */
  reset(name: string, position: Position): void {
    this.local.set(name, position);
  }

  /** Calls `listener` on every move until the returned function is called. */
  onAdvance(listener: () => void): () => void {
    this.advanced.add(listener);
    return () => this.advanced.delete(listener);
  }

  private advance(name: string, position: Position): void {
    this.local.set(name, position);
    for (const notify of [...this.advanced]) notify();
  }
}
