/**
 * The content filters of every guardrail that applies to a request, enforced on its prompt
 * texts before the upstream call (issue 44): `block` refuses it, `redact` rewrites what is sent
 * on, `flag` only records. What is recorded is counts by guardrail and filter, never text.
 */
import { DomainError } from '@svc/platform';
import type { AppliedGuardrail } from '../effective';
import { parseContentPolicy, type ContentFilter, type ContentPolicy } from './policy';
import { applyContentPolicy, DEFAULT_CONTENT_SCAN_LIMITS, type ContentScanLimits } from './scan';

/** One filter of one guardrail that matched, as the generation records it. */
export interface GuardrailContentFinding {
  guardrail_id: string;
  filter: string;
  action: 'flag' | 'redact' | 'block';
  count: number;
}

/**
 * Compiled content policies by guardrail and version: compiling builds detectors and RE2
 * programs, which a request should not pay for. A changed guardrail comes with a new
 * `updatedAt`, so it is compiled afresh; the old entry ages out.
 */
export class ContentPolicyCache {
  private readonly entries = new Map<string, ContentPolicy>();

  constructor(private readonly capacity = 1000) {}

  get size(): number {
    return this.entries.size;
  }

  of(guardrail: AppliedGuardrail): ContentPolicy {
    const key = `${guardrail.id}@${guardrail.updatedAt ?? ''}`;
    const hit = this.entries.get(key);
    if (hit) {
      // Map keeps insertion order: moving a hit to the end makes the first entry the least recently used.
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit;
    }
    const parsed = parseContentPolicy(guardrail.policy);
    // The policy was checked when it was written; one that no longer parses must not silently filter nothing.
    if (!parsed.ok) throw DomainError.internal(`guardrail ${guardrail.id}: its content policy does not compile (${parsed.problems[0]?.code})`);
    this.entries.set(key, parsed.policy);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
    return parsed.policy;
  }
}

/** Separates a guardrail's index from its filter's name inside the combined policy (neither contains it). */
const SEP = '\u0000';

export interface ContentEnforced {
  /** The texts to send on: redacted where a filter said so; the same texts when nothing matched. */
  texts: string[];
  findings: GuardrailContentFinding[];
}

/**
 * Applies the applied guardrails' filters, in their order (widest first), all to the texts as
 * they came: one guardrail's redaction never hides a match from another's block. Throws 400
 * `content_blocked` naming the guardrail and filter (param `param`), or 413 when the texts are
 * too large to scan whole.
 */
export function enforceContentPolicies(
  applied: readonly AppliedGuardrail[],
  texts: readonly string[],
  param: string,
  cache: ContentPolicyCache,
  limits: ContentScanLimits = DEFAULT_CONTENT_SCAN_LIMITS,
): ContentEnforced {
  const filters: ContentFilter[] = [];
  applied.forEach((guardrail, i) => {
    const hasFilters = guardrail.policy.content_filter_builtins.length > 0 || guardrail.policy.content_filters.length > 0;
    if (hasFilters) for (const f of cache.of(guardrail).filters) filters.push({ ...f, filter: `${i}${SEP}${f.filter}` });
  });
  if (filters.length === 0) return { texts: [...texts], findings: [] };
  const scan = applyContentPolicy({ filters }, texts, limits);
  if (!scan.ok) {
    throw new DomainError(
      'content_too_large',
      `${scan.problem.message} (guardrail content filters)`,
      { param, limit_bytes: scan.problem.limit_bytes },
      'too_large',
    );
  }
  const findings = scan.findings.map(({ filter, action, count }) => {
    const [index, name] = filter.split(SEP);
    return { guardrail_id: applied[Number(index)].id, filter: name, action, count };
  });
  const blocked = findings.find((f) => f.action === 'block');
  if (blocked) {
    const name = applied.find((g) => g.id === blocked.guardrail_id)!.policy.name;
    throw new DomainError(
      'content_blocked',
      `The request was blocked by the content filter ${blocked.filter} of guardrail "${name}" (${blocked.guardrail_id}).`,
      { param, guardrail_id: blocked.guardrail_id, filter: blocked.filter },
      'invalid',
    );
  }
  return { texts: scan.texts, findings };
}

/** This process's compiled policies: every request of every key shares them. */
const compiled = new ContentPolicyCache();

/** enforceContentPolicies with this process's cache of compiled policies; no filter, no work. */
export function enforceGuardrailContent(applied: readonly AppliedGuardrail[], texts: readonly string[], param: string): ContentEnforced {
  if (applied.length === 0) return { texts: [...texts], findings: [] };
  return enforceContentPolicies(applied, texts, param, compiled);
}
