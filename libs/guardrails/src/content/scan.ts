/**
 * Running a compiled content policy over a request's texts (the caller extracts them: message
 * contents, a prompt). Every filter looks at the texts as they came, so a count never depends on
 * what another filter redacted.
 */
import type { ContentAction, ContentPolicy } from './policy';
import type { Span } from './spans';

export interface ContentScanLimits {
  /**
   * The most the texts may weigh together, in UTF-8 bytes. Above it the request is refused as a
   * whole (`too_large`): scanning only a part would pass whatever sits after it.
   */
  readonly maxTotalBytes: number;
}

export const DEFAULT_CONTENT_SCAN_LIMITS: ContentScanLimits = { maxTotalBytes: 1 << 20 };

/**
 * One filter that fired, with how many times over all the texts. Never the matched text: findings
 * go into events and logs, and what was matched is what must not.
 */
export interface ContentFinding {
  readonly filter: string;
  readonly label: string;
  readonly action: ContentAction;
  readonly count: number;
}

export interface ContentScan {
  readonly ok: true;
  /** `block` when any blocking filter fired; redactions and flags never block. */
  readonly decision: 'allow' | 'block';
  /**
   * The texts to send on: each redacting filter's matches replaced by `[label]`. When the decision
   * is `block` nothing is sent on, and the texts are returned as given.
   */
  readonly texts: string[];
  /** In the policy's order (builtins, then custom filters); only filters that fired. */
  readonly findings: ContentFinding[];
}

export interface ContentScanRefused {
  readonly ok: false;
  readonly problem: {
    readonly code: 'too_large';
    readonly field: 'texts';
    readonly message: string;
    readonly limit_bytes: number;
    readonly size_bytes: number;
  };
}

export function applyContentPolicy(
  policy: ContentPolicy,
  texts: readonly string[],
  limits: ContentScanLimits = DEFAULT_CONTENT_SCAN_LIMITS,
): ContentScan | ContentScanRefused {
  // With nothing to look for there is nothing to refuse: the bound is on the scanning.
  if (policy.filters.length === 0) return { ok: true, decision: 'allow', texts: [...texts], findings: [] };
  const size = texts.reduce((sum, text) => sum + Buffer.byteLength(text, 'utf8'), 0);
  if (size > limits.maxTotalBytes)
    return {
      ok: false,
      problem: {
        code: 'too_large',
        field: 'texts',
        message: `The request's text is ${size} bytes; content filters scan at most ${limits.maxTotalBytes} bytes, so it is refused rather than scanned in part.`,
        limit_bytes: limits.maxTotalBytes,
        size_bytes: size,
      },
    };

  const findings: ContentFinding[] = [];
  // Per text, the redactions to make: a span and the label it becomes.
  const redactions: { span: Span; label: string; order: number }[][] = texts.map(() => []);
  policy.filters.forEach(({ filter, action, label, detect }, order) => {
    let count = 0;
    texts.forEach((text, t) => {
      const spans = detect(text);
      count += spans.length;
      if (action === 'redact') for (const span of spans) redactions[t].push({ span, label, order });
    });
    if (count > 0) findings.push({ filter, label, action, count });
  });

  const decision = findings.some((f) => f.action === 'block') ? 'block' : 'allow';
  return { ok: true, decision, texts: decision === 'block' ? [...texts] : texts.map((text, t) => redact(text, redactions[t])), findings };
}

/**
 * Replaces each span by `[label]`. Spans of different filters that overlap are replaced together
 * by one label: the span starting first names it (the filter listed first on a tie), so no piece
 * of a match survives between two labels.
 */
function redact(text: string, redactions: { span: Span; label: string; order: number }[]): string {
  if (redactions.length === 0) return text;
  const sorted = [...redactions].sort((a, b) => a.span[0] - b.span[0] || a.order - b.order);
  let out = '';
  let at = 0;
  for (let i = 0; i < sorted.length;) {
    const { span, label } = sorted[i];
    let end = span[1];
    for (i++; i < sorted.length && sorted[i].span[0] < end; i++) end = Math.max(end, sorted[i].span[1]);
    out += `${text.slice(at, span[0])}[${label}]`;
    at = end;
  }
  return out + text.slice(at);
}
