/** A half-open range of UTF-16 offsets into one text: what a filter matched, never the text itself. */
export type Span = readonly [start: number, end: number];

/** Finds a filter's matches in one text, in order and without overlaps. */
export type Detector = (text: string) => Span[];

/**
 * The spans of a global RegExp, each kept only if `accept` says so. `matchAll` works on a copy of
 * the RegExp, so the module-level patterns carry no `lastIndex` from one call into the next.
 */
export function regexSpans(re: RegExp, text: string, accept: (match: string) => boolean = () => true): Span[] {
  const spans: Span[] = [];
  for (const m of text.matchAll(re)) if (m[0].length > 0 && accept(m[0])) spans.push([m.index, m.index + m[0].length]);
  return spans;
}

/**
 * The spans of several detectors over one text as one ordered list; overlapping spans (one API key
 * shape inside another) become one, so that a secret counts once.
 */
export function unionSpans(lists: readonly Span[][]): Span[] {
  const all = lists.flat().sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const out: [number, number][] = [];
  for (const [start, end] of all) {
    const last = out[out.length - 1];
    if (last && start < last[1]) last[1] = Math.max(last[1], end);
    else out.push([start, end]);
  }
  return out;
}
