/**
 * `POST /v1/rerank` (spec 4.12): Cohere's request shape (as OpenRouter's unified rerank takes
 * it), documents as strings or `{text}`, billed per search unit (spec 1).
 */
import { operationOf, type Operation } from '@svc/metering';
import type { RerankResult } from '@svc/providers';
import { countTextTokens, TokenBudget } from '@svc/providers';
import { invalid, optionalBoolean, optionalPositiveInt, requireBody, requireString } from './types';

/** Spec 8: up to 1,000 documents per request. */
export const MAX_RERANK_DOCUMENTS = 1000;
/**
 * Cohere's search unit: one query with up to 100 documents; a document whose tokens, with the
 * query's, pass 500 is split into chunks of 500 that each count as a document. A document is
 * first cut to 4,096 tokens, as Cohere's `max_tokens_per_doc` does by default.
 */
export const DOCUMENTS_PER_SEARCH_UNIT = 100;
export const CHUNK_TOKENS = 500;
export const MAX_TOKENS_PER_DOC = 4096;

export interface RerankCall {
  model: string;
  query: string;
  documents: string[];
  topN: number | null;
  returnDocuments: boolean;
  /** Routing preferences, as on chat completions. */
  provider: unknown;
  /** Search units as the gateway counts them: the hold, and the charge when the provider reports none. */
  searchUnits: number;
  /** Query and documents in tokens: counted against the key's tokens per minute. */
  tokens: number;
}

export function rerankRequest(raw: unknown): RerankCall {
  const body = requireBody(raw);
  const model = requireString(body, 'model');
  const query = requireString(body, 'query');
  if (query.trim() === '') throw invalid('query must not be empty.', 'query');
  const documents = documentsOf(body.documents);
  const topN = optionalPositiveInt(body, 'top_n') ?? null;
  const returnDocuments = optionalBoolean(body, 'return_documents') ?? false;
  // One budget for the whole request, as for a chat prompt: 1,000 long documents count in bounded time.
  const budget = new TokenBudget();
  const queryTokens = countTextTokens(query, budget);
  let chunks = 0;
  let tokens = queryTokens;
  for (const document of documents) {
    const documentTokens = Math.min(countTextTokens(document, budget), MAX_TOKENS_PER_DOC);
    tokens += documentTokens;
    chunks += Math.max(1, Math.ceil((queryTokens + documentTokens) / CHUNK_TOKENS));
  }
  return { model, query, documents, topN, returnDocuments, provider: body.provider, searchUnits: Math.ceil(chunks / DOCUMENTS_PER_SEARCH_UNIT), tokens };
}

function documentsOf(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0) throw invalid('documents is required: a non-empty array of strings or {"text": ...} objects.', 'documents');
  if (value.length > MAX_RERANK_DOCUMENTS) throw invalid(`documents holds ${value.length} items; at most ${MAX_RERANK_DOCUMENTS} per request.`, 'documents');
  return value.map((document, i) => {
    if (typeof document === 'string') return document;
    const text = typeof document === 'object' && document !== null && !Array.isArray(document) ? (document as { text?: unknown }).text : undefined;
    if (typeof text === 'string') return text;
    throw invalid(`documents[${i}] must be a string or an object with a string "text".`, `documents[${i}]`);
  });
}

/**
 * Spec 4.12 through the metering pipeline: worst case the search units the gateway counts; the
 * charge the provider's own count when it reports one (Cohere), else the gateway's; no result,
 * nothing billed (spec 1 rule 3).
 */
export const rerankOperation: Operation<RerankCall, RerankResult> = {
  modelType: 'rerank',
  endpoint: '/v1/rerank',
  promptTokens: (call) => call.tokens,
  worstCase: (call) => ({ search_units: call.searchUnits }),
  call: (target, call) => {
    return operationOf(
      target,
      'rerank',
    )({ model: target.route.upstreamModel, query: call.query, documents: call.documents, ...(call.topN === null ? {} : { top_n: call.topN }) });
  },
  usageOf: (result, call) => ({ search_units: result.searchUnits ?? call.searchUnits }),
  returned: (result) => result.results.length,
};

/** The answer in Cohere's shape, with the service's id, the model that answered, the documents when asked and the cost. */
export function rerankAnswer(id: string, model: string, call: RerankCall, result: RerankResult, searchUnits: number, cost: number) {
  const results = (call.topN === null ? result.results : result.results.slice(0, call.topN)).map((r) => ({
    index: r.index,
    relevance_score: r.relevance_score,
    ...(call.returnDocuments ? { document: { text: call.documents[r.index] ?? '' } } : {}),
  }));
  return { id, model, results, meta: { billed_units: { search_units: searchUnits } }, usage: { search_units: searchUnits, cost } };
}
