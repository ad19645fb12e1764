import { AnthropicProvider } from './anthropic';
import { OpenAiCompatibleAdapter, type ChatProvider } from './openai-compatible';

export type AdapterName = 'openai' | 'anthropic';

export interface AdapterOptions {
  baseUrl: string;
  apiKey: string;
  timeoutMs?: number;
}

/** The client for a catalog provider's adapter: the one place that maps adapter names to classes. */
export function createChatProvider(adapter: AdapterName, options: AdapterOptions): ChatProvider {
  return adapter === 'anthropic' ? new AnthropicProvider(options) : new OpenAiCompatibleAdapter(options);
}
