import type { SqlExecutor } from '@svc/platform';
import type { GuardrailPolicy } from '../guardrail';

/** A guardrail that applies to a key, with the assignment that makes it apply. */
export interface KeyGuardrailRow {
  guardrail_id: string;
  scope: 'organization' | 'member' | 'key';
  subject: string;
  policy: GuardrailPolicy;
}

/**
 * The guardrails that apply to a key, widest first (issue 44, as `appliedGuardrails` decides for
 * a request): the workspace's, the member's (the key's creator, for a key of an organization)
 * and the key's own.
 */
export async function guardrailsOfKey(sql: SqlExecutor, caller: { workspaceId: string; keyId: string; memberId: string | null }): Promise<KeyGuardrailRow[]> {
  const { rows } = await sql.query<KeyGuardrailRow>(
    `SELECT a.guardrail_id, a.scope, a.subject, g.policy
       FROM guardrail_assignments a JOIN guardrails g ON g.guardrail_id = a.guardrail_id
      WHERE a.workspace_id = $1
        AND ((a.scope = 'organization' AND a.subject = $1) OR (a.scope = 'member' AND a.subject = $3) OR (a.scope = 'key' AND a.subject = $2))
      ORDER BY CASE a.scope WHEN 'organization' THEN 0 WHEN 'member' THEN 1 ELSE 2 END`,
    [caller.workspaceId, caller.keyId, caller.memberId],
  );
  return rows;
}

/**
 * The keys a guardrail applies to now, by its current assignments: its keys and the keys its
 * members made in the organization; null when it is the workspace-wide one (every key).
 */
export async function keysUnderGuardrail(sql: SqlExecutor, workspaceId: string, guardrailId: string): Promise<string[] | null> {
  const { rows } = await sql.query<{ key_id: string | null; organization: boolean }>(
    `SELECT NULL AS key_id, true AS organization FROM guardrail_assignments
      WHERE workspace_id = $1 AND guardrail_id = $2 AND scope = 'organization'
     UNION ALL
     SELECT subject, false FROM guardrail_assignments WHERE workspace_id = $1 AND guardrail_id = $2 AND scope = 'key'
     UNION ALL
     SELECT k.key_id, false FROM guardrail_assignments a
       JOIN api_keys k ON k.workspace_id = a.workspace_id AND k.created_by = a.subject AND k.org_id IS NOT NULL
      WHERE a.workspace_id = $1 AND a.guardrail_id = $2 AND a.scope = 'member'`,
    [workspaceId, guardrailId],
  );
  if (rows.some((r) => r.organization)) return null;
  return [...new Set(rows.map((r) => r.key_id!))];
}
