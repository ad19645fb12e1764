/**
 * A chat completion request (spec 4.2) as the use case reads it, from its body to the
 * generation that answers it: its fields, the request past its rules and planned, and what is
 * answered, streamed or not.
 */
import type { GuardrailContentFinding } from '@svc/guardrails';
import type { ModelPlan } from '@svc/catalog';
import type { WebSearchRun } from '@svc/interfaces';
import type { Metered, RoutedModel, StreamEncoder } from '@svc/metering';
import type { PresetUse } from '@svc/presets';
import type { ChatCompletion } from '@svc/providers';
import type { ChatPlugins, WebPlugin } from './chat-plugins';

/** A chat message as the rules read it; the rest of its fields go upstream as they are. */
export interface ChatRequestMessage {
  role: string;
  content?: unknown;
}

/** A chat-completions body (spec 4.2): the fields the use case reads; the other known fields go upstream as they are. */
export interface ChatRequest {
  model: string;
  models?: string[];
  messages: ChatRequestMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  max_tokens?: number;
  max_completion_tokens?: number;
  provider?: unknown;
  plugins?: unknown;
  transforms?: unknown;
  usage?: { include?: boolean };
  user?: string;
  safety_identifier?: string;
  response_format?: unknown;
  tools?: unknown;
  tool_choice?: unknown;
}

/** The engine of a web search: its routed providers, and the most one query may cost (the hold's figure). */
export interface SearchEngine {
  models: RoutedModel[];
  maxPerQuery: bigint;
}

/** A request's web search: the plugin's options and the engine they chose, routed once. */
export interface WebSearch {
  plugin: WebPlugin;
  engine: SearchEngine;
}

/**
 * A chat request past its rules (spec 4.2 rules 1, 4, 5 and 9; spec 2.5 presets), planned
 * once: the request as it goes on, the plugins to apply to its answer, the headers that report
 * what was changed, and the models that may answer with their providers.
 */
export interface PreparedChat {
  request: ChatRequest;
  plugins: ChatPlugins;
  /** `x-svc-ignored-params`, `x-svc-compressed-messages`. */
  headers: Record<string, string>;
  preset: PresetUse | null;
  /** Spec 4.2 rule 7: the web search to run before the model is called. */
  web: WebSearch | null;
  plan: ModelPlan;
  /** Issue 44: what the guardrails' content filters found in the prompt (counts only), recorded with the hold. */
  guardrailFindings: GuardrailContentFinding[];
}

export interface ChatCompletionResponse {
  generationId: string;
  /** Headers of the call (deprecation notices of the requested model, spec 9; the tokens window). */
  headers: Record<string, string>;
  body: Omit<ChatCompletion, 'usage'> & { usage: Record<string, unknown> & { cost: number } };
  /** The web search the generation ran (spec 4.2 rule 7), for the interfaces that show it in their own shape. */
  webSearch: WebSearchRun | null;
}

export interface StreamedChat {
  generationId: string;
  headers: Record<string, string>;
  /** True once the stream finished cleanly and was billed; false when it was cut short. */
  finished: Promise<boolean>;
}

/** The wire format of a stream, made once the generation's id and answering model are known. */
export type EncoderFactory = (generation: {
  id: string;
  model: string;
  provider: string;
  promptTokens: number;
  webSearch: WebSearchRun | null;
}) => StreamEncoder;

/** One chat request from its hold to its settlement. */
export interface Generation {
  metered: Metered;
  /** The request as it goes upstream: with the web search's results when one ran. */
  request: ChatRequest;
  webSearch: WebSearchRun | null;
  /** Searches billed on the generation (spec 4.2 rule 7): those that returned results. */
  searches: number;
}
