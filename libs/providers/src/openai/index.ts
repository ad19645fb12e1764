/**
 * OpenAI's wire format, spoken by OpenAI, OpenRouter, vLLM, Ollama, llama.cpp and the simulator:
 * every operation but rerank and search (realtime: its WebSocket endpoint).
 */
import type { ProviderDeclaration } from '../provider';
import { OpenAiCompatibleAdapter } from './client';
import { OPENAI_PARAMETERS } from './parameters';

export const openai: ProviderDeclaration = {
  operations: {
    chat: OPENAI_PARAMETERS.chat.openai,
    embed: OPENAI_PARAMETERS.embed,
    image: OPENAI_PARAMETERS.image,
    speech: OPENAI_PARAMETERS.speech,
    transcription: OPENAI_PARAMETERS.transcription,
    translation: OPENAI_PARAMETERS.translation,
    moderation: OPENAI_PARAMETERS.moderation,
    video: OPENAI_PARAMETERS.video,
    realtime: OPENAI_PARAMETERS.realtime,
  },
  client: (options) => new OpenAiCompatibleAdapter(options),
};

export { excludesReasoning } from '../provider';
export { OpenAiCompatibleAdapter, OpenAiCompatibleProvider, type OpenAiCompatibleOptions } from './client';
export { OPENAI_PARAMETERS } from './parameters';
