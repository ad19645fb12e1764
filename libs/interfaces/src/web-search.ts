/**
 * Web search inside a generation (spec 4.2 rule 7; 4.3 and 4.5 for the vendors' search tools):
 * what one search gave, how its results reach the model, and how the answer cites them. Each
 * interface presents the same run in its vendor's shape (chat `url_citation` annotations,
 * Anthropic `server_tool_use` and `web_search_tool_result` blocks, a Responses
 * `web_search_call` item). Pure: the clock is passed in.
 */
import type { SearchHit } from '@svc/providers';
import { truncateToTokens } from '@svc/providers';

export type { SearchHit };

/** The search one generation ran: its query, the engine that answered, and the results. */
export interface WebSearchRun {
  /** Random hex; each interface prefixes it (`srvtoolu_`, `ws_`) as its vendor's ids look. */
  id: string;
  query: string;
  /** The search engine's catalog id. */
  engine: string;
  hits: SearchHit[];
}

/** A citation of one result, in OpenRouter's chat shape (OpenAI's plus `content`). */
export interface UrlCitation {
  url: string;
  title: string;
  content: string;
  /** The span of the answer that cites the result (its markdown link, else its bare URL); 0 and 0 when the answer does not cite it. */
  start_index: number;
  end_index: number;
}

/** How much of each page the model is given: bounded, so the hold can count it before the search runs (spec 1 rule 1). */
export const WEB_RESULT_TOKENS = 256;
/** Spec 4.2 rule 7 with OpenRouter's default (5); engines return at most 20. */
export const DEFAULT_WEB_RESULTS = 5;
export const MAX_WEB_RESULTS = 20;

/**
 * The prompt tokens the search can add at most, for the hold: the instructions plus, per result,
 * its title, URL and date (bounded by WEB_RESULT_TOKENS each again, generously) and its cut content.
 */
export function webSearchPromptTokens(maxResults: number): number {
  return 128 + maxResults * 3 * WEB_RESULT_TOKENS;
}

/**
 * The message that gives the results to the model, placed before the last user message. The
 * wording follows OpenRouter's web plugin, so models tuned on it cite the same way; `prompt`
 * replaces the instructions (the plugin's `search_prompt`).
 */
export function webSearchMessage(run: WebSearchRun, now: Date, prompt?: string): { role: 'system'; content: string } {
  const date = now.toISOString().slice(0, 10);
  const instructions =
    prompt ??
    `A web search was conducted on ${date}. Incorporate the following web search results into your response.\n\n` +
      'IMPORTANT: Cite them using markdown links named using the domain of the source.\nExample: [nytimes.com](https://nytimes.com/some-page).';
  const results = run.hits.map((hit, i) => {
    const cap = (text: string) => truncateToTokens(text, WEB_RESULT_TOKENS);
    const lines = [`[${i + 1}] ${cap(hit.title)}`, `URL: ${cap(hit.url)}`];
    if (hit.date) lines.push(`Published: ${cap(hit.date)}`);
    lines.push(cap(hit.content));
    return lines.join('\n');
  });
  return { role: 'system', content: [instructions, ...results].join('\n\n') };
}

/** The messages with the search results given just before the last user message (or last, when there is none). */
export function withWebSearch<M extends { role: string }>(messages: readonly M[], message: M): M[] {
  let last = -1;
  messages.forEach((m, i) => {
    if (m.role === 'user') last = i;
  });
  const at = last === -1 ? messages.length : last;
  return [...messages.slice(0, at), message, ...messages.slice(at)];
}

/** The text of the last user message: what the web plugin searches for. */
export function lastUserText(messages: readonly { role: string; content?: unknown }[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const { role, content } = messages[i];
    if (role !== 'user') continue;
    if (typeof content === 'string') return content;
    if (Array.isArray(content)) {
      return content
        .map((part: unknown) =>
          typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'text' ? String((part as { text?: unknown }).text ?? '') : '',
        )
        .filter((text) => text !== '')
        .join('\n');
    }
    return '';
  }
  return '';
}

/** One citation per result, in the engine's order, located in `text` where the answer cites it. */
export function urlCitations(text: string | null | undefined, run: WebSearchRun): UrlCitation[] {
  const answer = text ?? '';
  return run.hits.map((hit) => {
    const span = citedSpan(answer, hit.url);
    return { url: hit.url, title: hit.title, content: hit.content, start_index: span[0], end_index: span[1] };
  });
}

/** Chat's `message.annotations` (and `delta.annotations` when streamed). */
export function chatAnnotations(text: string | null | undefined, run: WebSearchRun): { type: 'url_citation'; url_citation: UrlCitation }[] {
  return urlCitations(text, run).map((citation) => ({ type: 'url_citation', url_citation: citation }));
}

/** A markdown link to `url` (`[label](url)`), else the bare URL; [0, 0] when absent. */
function citedSpan(text: string, url: string): [number, number] {
  const link = text.indexOf(`](${url})`);
  if (link !== -1) {
    const open = text.lastIndexOf('[', link);
    if (open !== -1) return [open, link + url.length + 3];
  }
  const bare = text.indexOf(url);
  return bare === -1 ? [0, 0] : [bare, bare + url.length];
}
