/** Anthropic's native Messages API: chat only. */
import { declareProvider } from '../provider';
import { chat } from './chat';
import { anthropicConnection } from './client';

export const anthropic = declareProvider(anthropicConnection, {
  chat,
});

export * from './client';
