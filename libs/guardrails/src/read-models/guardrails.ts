import type { RecordedEvent } from '@svc/eventstore';
import type { SqlExecutor } from '@svc/platform';
import { eventTime, perEvent, type Projection } from '@svc/projections';
import type { GuardrailEvent, GuardrailPolicy } from '../guardrail';

type G<T extends GuardrailEvent['type']> = RecordedEvent<T, Extract<GuardrailEvent, { type: T }>['data']>;

/**
 * A workspace's guardrails and who each is assigned to (issue 44), for the management API and
 * for the key lookup that finds what applies to a request. The organization's workspace-wide
 * guardrail is the assignment of scope `organization` whose subject is the workspace.
 */
export const guardrailsProjection: Projection = perEvent({
  name: 'guardrails',
  tables: ['guardrails', 'guardrail_assignments'],
  schema: [
    `CREATE TABLE IF NOT EXISTS guardrails (
      workspace_id text NOT NULL,
      guardrail_id text NOT NULL,
      policy jsonb NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (guardrail_id)
    )`,
    `CREATE INDEX IF NOT EXISTS guardrails_workspace ON guardrails (workspace_id, created_at)`,
    `CREATE TABLE IF NOT EXISTS guardrail_assignments (
      workspace_id text NOT NULL,
      scope text NOT NULL,
      subject text NOT NULL,
      guardrail_id text NOT NULL,
      assigned_at timestamptz NOT NULL,
      PRIMARY KEY (workspace_id, scope, subject)
    )`,
    `CREATE INDEX IF NOT EXISTS guardrail_assignments_guardrail ON guardrail_assignments (guardrail_id, scope)`,
  ],
  handlers: {
    GuardrailCreated: async (e: G<'GuardrailCreated'>, tx) => {
      const d = e.data;
      await tx.query(`INSERT INTO guardrails (workspace_id, guardrail_id, policy, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)`, [
        d.workspace_id,
        d.guardrail_id,
        JSON.stringify(d.policy),
        eventTime(e),
      ]);
    },
    GuardrailUpdated: async (e: G<'GuardrailUpdated'>, tx) => {
      await tx.query(`UPDATE guardrails SET policy = $2, updated_at = $3 WHERE guardrail_id = $1`, [
        e.data.guardrail_id,
        JSON.stringify(e.data.policy),
        eventTime(e),
      ]);
    },
    GuardrailDeleted: async (e: G<'GuardrailDeleted'>, tx) => {
      await tx.query(`DELETE FROM guardrail_assignments WHERE workspace_id = $1 AND guardrail_id = $2`, [e.data.workspace_id, e.data.guardrail_id]);
      await tx.query(`DELETE FROM guardrails WHERE guardrail_id = $1`, [e.data.guardrail_id]);
    },
    GuardrailAssigned: async (e: G<'GuardrailAssigned'>, tx) => {
      const d = e.data;
      // A subject holds one guardrail per scope: assigning replaces.
      await tx.query(
        `INSERT INTO guardrail_assignments (workspace_id, scope, subject, guardrail_id, assigned_at)
         SELECT $1, $2, s, $3, $5 FROM unnest($4::text[]) AS s
         ON CONFLICT (workspace_id, scope, subject) DO UPDATE SET guardrail_id = EXCLUDED.guardrail_id, assigned_at = EXCLUDED.assigned_at`,
        [d.workspace_id, d.scope, d.guardrail_id, d.subjects, eventTime(e)],
      );
    },
    GuardrailUnassigned: async (e: G<'GuardrailUnassigned'>, tx) => {
      const d = e.data;
      await tx.query(`DELETE FROM guardrail_assignments WHERE workspace_id = $1 AND scope = $2 AND guardrail_id = $3 AND subject = ANY($4::text[])`, [
        d.workspace_id,
        d.scope,
        d.guardrail_id,
        d.subjects,
      ]);
    },
    OrganizationGuardrailSet: async (e: G<'OrganizationGuardrailSet'>, tx) => {
      await tx.query(
        `INSERT INTO guardrail_assignments (workspace_id, scope, subject, guardrail_id, assigned_at) VALUES ($1, 'organization', $1, $2, $3)
         ON CONFLICT (workspace_id, scope, subject) DO UPDATE SET guardrail_id = EXCLUDED.guardrail_id, assigned_at = EXCLUDED.assigned_at`,
        [e.data.workspace_id, e.data.guardrail_id, eventTime(e)],
      );
    },
    OrganizationGuardrailRemoved: async (e: G<'OrganizationGuardrailRemoved'>, tx) => {
      await tx.query(`DELETE FROM guardrail_assignments WHERE workspace_id = $1 AND scope = 'organization' AND guardrail_id = $2`, [
        e.data.workspace_id,
        e.data.guardrail_id,
      ]);
    },
  },
});

export interface GuardrailRow {
  workspace_id: string;
  guardrail_id: string;
  policy: GuardrailPolicy;
  created_at: Date;
  updated_at: Date;
}

export async function listGuardrails(sql: SqlExecutor, workspaceId: string): Promise<GuardrailRow[]> {
  const { rows } = await sql.query<GuardrailRow>(`SELECT * FROM guardrails WHERE workspace_id = $1 ORDER BY created_at, guardrail_id`, [workspaceId]);
  return rows;
}

export async function findGuardrail(sql: SqlExecutor, workspaceId: string, guardrailId: string): Promise<GuardrailRow | null> {
  const { rows } = await sql.query<GuardrailRow>(`SELECT * FROM guardrails WHERE workspace_id = $1 AND guardrail_id = $2`, [workspaceId, guardrailId]);
  return rows[0] ?? null;
}

export async function guardrailAssignments(
  sql: SqlExecutor,
  guardrailId: string,
  scope: 'key' | 'member' | 'organization',
): Promise<{ subject: string; assigned_at: Date }[]> {
  const { rows } = await sql.query<{ subject: string; assigned_at: Date }>(
    `SELECT subject, assigned_at FROM guardrail_assignments WHERE guardrail_id = $1 AND scope = $2 ORDER BY assigned_at, subject`,
    [guardrailId, scope],
  );
  return rows;
}
