/** Anthropic's native Messages API: chat only. */
import type { ProviderDeclaration } from '../provider';
import { ANTHROPIC_CHAT_PARAMETERS, AnthropicProvider } from './client';

export const anthropic: ProviderDeclaration = {
  operations: { chat: ANTHROPIC_CHAT_PARAMETERS },
  client: (options) => new AnthropicProvider(options),
};

export * from './client';
