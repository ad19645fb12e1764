/** Embeddings (spec 4.7), rerank (spec 4.12), moderation (spec 4.13) and web search (spec 4.14). */
import { PARAMETERS } from '@svc/providers';
import {
  MAX_DOMAIN_FILTERS,
  MAX_EMBEDDING_INPUTS,
  MAX_MODERATION_INPUTS,
  MAX_QUERY_CHARACTERS,
  MAX_RERANK_DOCUMENTS,
  MAX_SEARCH_QUERIES,
  MAX_SEARCH_RESULTS,
  MAX_TOKENS_PER_PAGE,
} from '@svc/interfaces';
import { anyObject, arr, bool, constant, extension, int, type JsonSchema, nullable, num, obj, oneOfValues, ref, str, usd } from '../json-schema';
import { modelId, text, ProviderPreferences } from './shared';

export const Embedding = obj({ object: constant('embedding'), index: int(), embedding: { anyOf: [arr(num()), str('base64')] } }, { open: true });

export const EmbeddingsRequest = obj(
  {
    model: modelId(),
    input: {
      description: `a string, up to ${MAX_EMBEDDING_INPUTS} strings, a token array or up to ${MAX_EMBEDDING_INPUTS} token arrays; nothing empty`,
      anyOf: [
        str(undefined, { minLength: 1 }),
        arr(str(undefined, { minLength: 1 }), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
        arr(int(undefined, { minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { minItems: 1 }),
        arr(arr(int(undefined, { minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { minItems: 1 }), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
      ],
    },
    dimensions: nullable(int(undefined, { minimum: 1 })),
    encoding_format: nullable(oneOfValues(['float', 'base64'])),
    user: str(),
    provider: ProviderPreferences,
  } satisfies Record<(typeof PARAMETERS.embed)[number], JsonSchema>,
  { required: ['model', 'input'], open: true, description: 'Spec 4.7.' },
);

export const EmbeddingsResponse = obj(
  {
    object: constant('list'),
    data: arr(ref('Embedding')),
    model: str(),
    usage: obj({ prompt_tokens: int(), total_tokens: int(), cost: extension(usd()) }, { required: ['prompt_tokens', 'total_tokens', 'cost'], open: true }),
    id: extension(str('the generation id')),
  },
  { required: ['object', 'data', 'model', 'usage', 'id'], open: true },
);

export const RerankRequest = obj(
  {
    model: modelId(),
    query: text(),
    documents: arr({ anyOf: [str(), obj({ text: str() }, { open: true })] }, { minItems: 1, maxItems: MAX_RERANK_DOCUMENTS }),
    top_n: nullable(int(undefined, { minimum: 1 })),
    return_documents: nullable(bool()),
    provider: ProviderPreferences,
  } satisfies Record<(typeof PARAMETERS.rerank)[number], JsonSchema>,
  { required: ['model', 'query', 'documents'], open: true, description: "Spec 4.12, Cohere's shape." },
);
export const RerankResponse = obj(
  {
    id: str(),
    model: str(),
    results: arr(obj({ index: int(), relevance_score: num(), document: anyObject() }, { required: ['index', 'relevance_score'] })),
    meta: obj({ billed_units: obj({ search_units: int() }, { open: true }) }, { open: true }),
    usage: obj({ search_units: int(), cost: usd() }),
  },
  { open: true },
);

export const ModerationRequest = obj(
  {
    model: nullable(modelId('the catalog default moderation model when left out or null')),
    input: {
      anyOf: [
        str(undefined, { minLength: 1 }),
        arr(str(), { minItems: 1, maxItems: MAX_MODERATION_INPUTS }),
        arr(
          {
            anyOf: [
              obj({ type: constant('text'), text: str() }, { open: true }),
              obj(
                {
                  type: constant('image_url'),
                  image_url: obj(
                    { url: str('https or a base64 data URL of an image', { pattern: '^(?:https://|data:image/)' }) },
                    { required: ['url'], open: true },
                  ),
                },
                { open: true },
              ),
            ],
          },
          { minItems: 1, maxItems: MAX_MODERATION_INPUTS },
        ),
      ],
    },
    provider: { description: 'accepted and not read: a moderation goes to the first provider of its model' },
  } satisfies Record<(typeof PARAMETERS.moderation)[number], JsonSchema>,
  { required: ['input'], open: true, description: 'Spec 4.13.' },
);
export const ModerationResponse = obj(
  {
    id: str(),
    model: str(),
    results: arr(
      obj(
        { flagged: bool(), categories: { type: 'object', additionalProperties: bool() }, category_scores: { type: 'object', additionalProperties: num() } },
        { open: true },
      ),
    ),
    usage: extension(obj({ cost: usd('always 0') })),
  },
  { open: true },
);

export const SearchRequest = obj(
  {
    model: { description: 'not read: the engine is `search_tool_name` on /v1/search, the path on /v1/search/{engine}' },
    query: {
      anyOf: [
        text(undefined, { maxLength: MAX_QUERY_CHARACTERS }),
        arr(text(undefined, { maxLength: MAX_QUERY_CHARACTERS }), { minItems: 1, maxItems: MAX_SEARCH_QUERIES }),
      ],
    },
    search_tool_name: nullable(modelId('search engine id from GET /v1/models?type=search')),
    max_results: nullable(int(undefined, { minimum: 1, maximum: MAX_SEARCH_RESULTS, default: 10 })),
    search_domain_filter: nullable(
      arr(str('example.com, or -example.com to exclude it; all kept or all excluded'), { minItems: 1, maxItems: MAX_DOMAIN_FILTERS }),
    ),
    country: nullable(str('ISO 3166-1 alpha-2', { pattern: '^[A-Za-z]{2}$' })),
    max_tokens_per_page: nullable(int(undefined, { minimum: 1, maximum: MAX_TOKENS_PER_PAGE })),
    provider: ProviderPreferences,
  } satisfies Record<(typeof PARAMETERS.search)[number], JsonSchema>,
  { required: ['query'], open: true, description: 'Spec 4.14.' },
);
export const SearchResult = obj({ title: str(), url: str(), snippet: str(), content: str(), date: nullable(str()) });
export const SearchResponse = obj({
  id: str(),
  object: constant('search'),
  model: str(),
  results: { anyOf: [arr(ref('SearchResult')), arr(arr(ref('SearchResult')))] },
  usage: obj({ queries: int(), cost: usd() }),
});
