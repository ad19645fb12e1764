/**
 * OpenAI's wire format, spoken by OpenAI, OpenRouter, vLLM, Ollama, llama.cpp and the simulator:
 * every operation but rerank and search (realtime: its WebSocket endpoint). Each operation is
 * one file of this folder and one line here.
 */
import { declareProvider } from '../provider';
import { chat } from './chat';
import { openAiConnection } from './connection';
import { embed } from './embed';
import { image } from './image';
import { moderation } from './moderation';
import { realtime } from './realtime';
import { speech } from './speech';
import { transcription, translation } from './transcription';
import { video } from './video';

export const openai = declareProvider(openAiConnection, {
  chat,
  embed,
  image,
  speech,
  transcription,
  translation,
  moderation,
  video,
  realtime,
});

export { excludesReasoning } from '../provider';
export { type OpenAiCompatibleOptions } from './connection';
export { OPENAI_PARAMETERS } from './parameters';
