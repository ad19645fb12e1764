/** Every provider the catalog can name as an `adapter`: the one place that maps names to folders. */
import { anthropic } from './anthropic';
import { cohere } from './cohere';
import { jina } from './jina';
import { openai } from './openai';
import { MODEL_TYPE_OPERATIONS, type OperationName } from './operations';
import type { AdapterOptions, Provider, ProviderDeclaration } from './provider';
import { searxng } from './searxng';
import { tavily } from './tavily';
import { videorouter } from './videorouter';

export const PROVIDERS = { openai, anthropic, cohere, jina, searxng, tavily, videorouter } as const satisfies Record<string, ProviderDeclaration>;
export type AdapterName = keyof typeof PROVIDERS;
const DECLARATIONS: Readonly<Record<AdapterName, ProviderDeclaration>> = PROVIDERS;
export const ADAPTERS = Object.keys(PROVIDERS) as AdapterName[];

/** The client for a catalog provider's adapter: the calls of the operations it declares. */
export function createProvider(adapter: AdapterName, options: AdapterOptions): Provider {
  return DECLARATIONS[adapter].client(options);
}

/** The operations an adapter declares. */
export function operationsOf(adapter: AdapterName): OperationName[] {
  return Object.keys(DECLARATIONS[adapter].operations) as OperationName[];
}

/**
 * Whether an adapter can serve models of a catalog type: it declares one of the type's
 * operations. A type with no operation would be listed only, so any adapter could carry it.
 */
export function servesModelType(adapter: AdapterName, type: string): boolean {
  const wanted = MODEL_TYPE_OPERATIONS[type];
  return wanted === undefined || wanted.some((operation) => DECLARATIONS[adapter].operations[operation] !== undefined);
}
