/**
 * What the upstreams that serve one operation share (rerank in `cohere/` and `jina/`, search in
 * `searxng/` and `tavily/`, video in `videorouter/`): where and how they are called, and a refusal of the methods every
 * ChatProvider has but they do not serve. They declare no other operation, so the catalog never
 * routes another model type to them; the refusals only guard against a wiring mistake.
 */
import type { AdapterOptions, ChatProvider } from './provider';
import { ProviderError } from './provider-error';
import { DEFAULT_TIMEOUT_MS } from './transport';

export type SingleOperationOptions = Pick<AdapterOptions, 'baseUrl' | 'apiKey' | 'timeoutMs'>;

export abstract class SingleOperationAdapter implements ChatProvider {
  protected readonly baseUrl: string;
  protected readonly timeoutMs: number;

  /**
   * `serves` names the operation in the refusals ("a rerank provider does not serve ...").
   * `headers` default to a bearer key and a JSON body, what every one of them but SearXNG wants.
   */
  constructor(
    options: SingleOperationOptions,
    private readonly serves: string,
    protected readonly headers: Record<string, string> = { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' },
  ) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /**
   * The base URL without a version segment at its end (`.../v1`, as the simulator's URL has), for
   * upstreams whose paths carry their own version or none.
   */
  protected get root(): string {
    return this.baseUrl.replace(/\/v\d+$/, '');
  }

  chatCompletion(): never {
    throw this.unsupported('chat completions');
  }
  // eslint-disable-next-line require-yield
  async *streamChatCompletion(): AsyncGenerator<never> {
    throw this.unsupported('chat completions');
  }
  embeddings(): never {
    throw this.unsupported('embeddings');
  }

  private unsupported(operation: string): ProviderError {
    return new ProviderError({ kind: 'http', status: 400, message: `a ${this.serves} provider does not serve ${operation}` });
  }
}
