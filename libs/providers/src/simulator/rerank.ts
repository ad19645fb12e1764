/**
 * The simulated rerankers: Cohere v2 (`POST /v2/rerank`) and Jina (`POST /v1/rerank`). Both
 * score a document by the share of the query's distinct words (letters and digits, case
 * folded) that it contains, a number in [0, 1]; results are sorted by score, ties by index, so
 * the order is deterministic.
 *
 * Cohere bills search units: each document, cut to `max_tokens_per_doc`, counts
 * ceil((tokens(query) + tokens(document)) / 500) chunks, and every 100 chunks (or part of them)
 * are one unit, per Cohere's published definition for rerank-v3.5. Jina bills tokens: the query
 * once per document plus the document.
 *
 * Cohere errors are `{message}` bodies whose text starts `invalid request: ` for a 400, as
 * Cohere's do. Jina has no published error schema, so Jina errors use the OpenAI body the other
 * OpenAI-style routes use. The `#sim` directives come from the query; `empty` answers no
 * results (the request is still billed, as it was processed).
 */
import { isRecord } from '../json';
import { countTextTokens, truncateToTokens } from '../tokens';
import { parseDirectives, type SimDirectives } from './directives';
import { SimError } from './http';

export interface RerankRequest {
  model: string;
  /** The query without its `#sim` lines. */
  query: string;
  documents: string[];
  topN: number | undefined;
  directives: SimDirectives;
}

export interface CohereRerankRequest extends RerankRequest {
  maxTokensPerDoc: number;
}

export interface JinaRerankRequest extends RerankRequest {
  returnDocuments: boolean;
}

export interface Ranked {
  index: number;
  relevance_score: number;
}

const MAX_DOCUMENTS = 10_000;
const DEFAULT_MAX_TOKENS_PER_DOC = 4096;
const CHUNK_TOKENS = 500;
const CHUNKS_PER_SEARCH_UNIT = 100;

/** A failure answered with Cohere's `{message}` body. */
export const cohereErrorBody = (error: SimError) => ({ message: error.status === 400 ? `invalid request: ${error.message}` : error.message });

function parseCommon(body: unknown, documentsOf: (documents: unknown[]) => string[]): RerankRequest {
  if (!isRecord(body)) throw new SimError(400, 'request body must be a JSON object');
  if (typeof body.model !== 'string' || body.model === '') throw new SimError(400, 'model is required', 'model');
  if (typeof body.query !== 'string' || body.query.trim() === '') throw new SimError(400, 'query must be a non-empty string', 'query');
  if (!Array.isArray(body.documents) || body.documents.length === 0) {
    throw new SimError(400, 'list of documents must not be empty', 'documents');
  }
  if (body.documents.length > MAX_DOCUMENTS) throw new SimError(400, `at most ${MAX_DOCUMENTS} documents are allowed`, 'documents');
  const topN = body.top_n ?? undefined;
  if (topN !== undefined && !(Number.isInteger(topN) && (topN as number) >= 1)) {
    throw new SimError(400, 'top_n must be a positive integer', 'top_n');
  }
  const { directives, text } = parseDirectives(body.query);
  return { model: body.model, query: text, documents: documentsOf(body.documents), topN: topN as number | undefined, directives };
}

export function parseCohereRerankRequest(body: unknown): CohereRerankRequest {
  const common = parseCommon(body, (documents) => {
    if (!documents.every((d): d is string => typeof d === 'string')) throw new SimError(400, 'documents must be strings', 'documents');
    return documents;
  });
  const max = (body as Record<string, unknown>).max_tokens_per_doc ?? DEFAULT_MAX_TOKENS_PER_DOC;
  if (!(Number.isInteger(max) && (max as number) >= 1)) throw new SimError(400, 'max_tokens_per_doc must be a positive integer', 'max_tokens_per_doc');
  return { ...common, maxTokensPerDoc: max as number };
}

export function parseJinaRerankRequest(body: unknown): JinaRerankRequest {
  const common = parseCommon(body, (documents) =>
    documents.map((d) => {
      if (typeof d === 'string') return d;
      if (isRecord(d) && typeof d.text === 'string') return d.text;
      throw new SimError(400, 'documents must be strings or {"text": ...} objects (the simulator ranks no images)', 'documents');
    }),
  );
  const returnDocuments = (body as Record<string, unknown>).return_documents ?? true;
  if (typeof returnDocuments !== 'boolean') throw new SimError(400, 'return_documents must be a boolean', 'return_documents');
  return { ...common, returnDocuments };
}

const wordsOf = (text: string) => new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);

/** The share of the query's distinct words found in the document. */
export function relevance(query: string, document: string): number {
  const wanted = wordsOf(query);
  if (wanted.size === 0) return 0;
  const present = wordsOf(document);
  let found = 0;
  for (const word of wanted) if (present.has(word)) found++;
  return found / wanted.size;
}

/** Every document scored, best first (ties by index), cut to top_n; none with `empty`. */
export function rank(request: RerankRequest, documents = request.documents): Ranked[] {
  if (request.directives.empty) return [];
  return documents
    .map((document, index) => ({ index, relevance_score: relevance(request.query, document) }))
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
    .slice(0, request.topN ?? documents.length);
}

export function cohereRerankResponse(request: CohereRerankRequest, id: string) {
  const documents = request.documents.map((d) => truncateToTokens(d, request.maxTokensPerDoc));
  const queryTokens = countTextTokens(request.query);
  const chunks = documents.reduce((sum, d) => sum + Math.max(1, Math.ceil((queryTokens + countTextTokens(d)) / CHUNK_TOKENS)), 0);
  return {
    id,
    results: rank(request, documents),
    meta: { api_version: { version: '2' }, billed_units: { search_units: Math.ceil(chunks / CHUNKS_PER_SEARCH_UNIT) } },
  };
}

export function jinaRerankResponse(request: JinaRerankRequest) {
  const queryTokens = countTextTokens(request.query);
  const tokens = request.documents.reduce((sum, d) => sum + queryTokens + countTextTokens(d), 0);
  const results = rank(request).map((r) => (request.returnDocuments ? { ...r, document: { text: request.documents[r.index] } } : r));
  return { model: request.model, usage: { total_tokens: tokens, prompt_tokens: tokens }, results };
}
