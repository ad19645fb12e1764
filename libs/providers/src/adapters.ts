import { AnthropicProvider } from './anthropic';
import { CohereRerankAdapter, JinaRerankAdapter } from './rerank';
import { OPENAI_CHAT_PARAMS, OpenAiCompatibleAdapter, ROUTER_CHAT_PARAMS, type ChatProvider } from './openai-compatible';

export type AdapterName = 'openai' | 'anthropic' | 'cohere' | 'jina';

export interface AdapterOptions {
  baseUrl: string;
  apiKey: string;
  timeoutMs?: number;
  /** OpenAI-compatible upstreams: OpenAI's own request fields, or a router's (see the catalog). */
  dialect?: 'openai' | 'router';
}

/** The client for a catalog provider's adapter: the one place that maps adapter names to classes. */
export function createChatProvider(adapter: AdapterName, options: AdapterOptions): ChatProvider {
  if (adapter === 'anthropic') return new AnthropicProvider(options);
  if (adapter === 'cohere') return new CohereRerankAdapter(options);
  if (adapter === 'jina') return new JinaRerankAdapter(options);
  return new OpenAiCompatibleAdapter({ ...options, chatParams: options.dialect === 'router' ? ROUTER_CHAT_PARAMS : OPENAI_CHAT_PARAMS });
}
