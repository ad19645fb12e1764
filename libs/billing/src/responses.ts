/**
 * Spec 4.5 as use cases: POST /responses on the chat use case, and the stored responses of the
 * caller's workspace.
 */
import { randomBytes } from 'node:crypto';
import { type ItemList, listInputItems, storageUnavailable, StoredResponses } from '@svc/conversations';
import type { Caller } from '@svc/identity';
import {
  chatToResponse,
  invalid,
  type Json,
  optionalBoolean,
  requireBody,
  type ResponseContext,
  type ResponseItem,
  type ResponseObject,
  RESPONSES_FIELDS,
  ResponsesStreamEncoder,
  responsesToChat,
  type WebSearchRun,
} from '@svc/interfaces';
import type { StreamSink } from '@svc/metering';
import { type Clock, DomainError, type SqlRunner } from '@svc/platform';
import type { BilledAnswer, CallTags } from './answered';
import type { ChatCompletions } from './chat';
import { throughChat } from './through-chat';

const ENDPOINT = '/v1/responses';

/** What POST /responses needs to know before anything else happens. */
export interface ResponsesRequest {
  body: Json;
  /** Spec 4.5: default true. */
  store: boolean;
  previousResponseId: string | null;
}

/**
 * The response id is the generation's, under OpenAI's prefix: `gen-<hex>` answers as
 * `resp_<hex>`. A response cache hit gets a generation id of its own but keeps the source's
 * response id, the one its stored conversation is kept under.
 */
export function responseIdOf(generationId: string): string {
  return `resp_${generationId.replace(/^gen-/, '')}`;
}

/** The generation a `resp_` id names (issue 15.2: every id handed out can be looked up); other ids as they are. */
export function generationIdOf(id: string): string {
  return id.startsWith('resp_') ? `gen-${id.slice('resp_'.length)}` : id;
}

function newItemId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}

/**
 * Spec 4.5: the Responses interface on the chat pipeline, with its stored conversations
 * (libs/conversations): kept 30 days unless `store: false`, continued with
 * `previous_response_id`, visible to every key of the workspace that created them.
 */
export class Responses {
  private readonly stored: StoredResponses;
  private readonly clock: Clock;

  constructor(
    private readonly chat: ChatCompletions,
    private readonly deps: { clock: Clock; sql: SqlRunner; encryptionKey(): Buffer | null; log: { error(message: string): void } },
  ) {
    this.clock = deps.clock;
    // Read at each use: the key is configuration, and without it storage is refused, not the gateway.
    this.stored = new StoredResponses(deps.sql, deps.encryptionKey);
  }

  /**
   * The fields that decide what is kept, checked before the edge takes an idempotency claim
   * and before anything is held: without SVC_ENCRYPTION_KEY a request that needs storage (to
   * keep its answer, or to read the conversation it continues) is refused with 503.
   */
  readRequest(body: unknown): ResponsesRequest {
    const b = requireBody(body);
    const store = optionalBoolean(b, 'store') ?? true;
    const previous = b.previous_response_id;
    if (previous !== undefined && previous !== null && (typeof previous !== 'string' || previous === '')) {
      throw invalid('previous_response_id must be the id of a stored response.', 'previous_response_id');
    }
    const previousResponseId = typeof previous === 'string' ? previous : null;
    if ((store || previousResponseId !== null) && !this.stored.available) throw storageUnavailable();
    return { body: b, store, previousResponseId };
  }

  async answer<S extends StreamSink>(caller: Caller, request: ResponsesRequest, tags: CallTags, openSink: () => S): Promise<BilledAnswer<S>> {
    const now = this.clock.now();
    const earlier = request.previousResponseId === null ? null : await this.conversation(caller, request.previousResponseId, now);
    const { chat, inputItems } = responsesToChat(request.body, earlier === null ? null : { items: earlier }, newItemId);
    // What the model is given besides the instructions: a later response continues from here.
    const conversation = [...(earlier ?? []), ...inputItems];
    const context = (generationId: string, model: string, provider: string | null, webSearch: WebSearchRun | null): ResponseContext => ({
      id: responseIdOf(generationId),
      created: Math.floor(now.getTime() / 1000),
      model,
      provider,
      request: request.body,
      previousResponseId: request.previousResponseId,
      store: request.store,
      webSearch,
    });
    const keep = async (response: ResponseObject) => {
      if (request.store)
        await this.stored.save({ id: response.id, workspaceId: caller.workspaceId, keyId: caller.keyId, createdAt: now, response, inputItems: conversation });
    };

    let encoder: ResponsesStreamEncoder | null = null;
    return throughChat(
      this.chat,
      caller,
      chat,
      { ...tags, endpoint: ENDPOINT },
      {
        json: async (completion, webSearch) => {
          const response = chatToResponse(
            completion,
            context(completion.id, completion.model, typeof completion.provider === 'string' ? completion.provider : null, webSearch),
          );
          try {
            // Written before the answer goes out, so the client's next request finds it.
            await keep(response);
            return response;
          } catch (err) {
            // The call is done and billed: failing it now would bill an error (spec 1 rule 3).
            // The answer says instead that it was not kept.
            this.deps.log.error(`${response.id} not stored: ${err instanceof Error ? err.message : String(err)}`);
            return { ...response, store: false };
          }
        },
        encoder: ({ id, model, provider, webSearch }) => (encoder = new ResponsesStreamEncoder(context(id, model, provider, webSearch))),
        // A stream that broke off ended in response.failed: nothing to continue from. The
        // completed event is out already: a failure to store can only be logged (by throughChat).
        beforeStreamEnd: async (clean) => {
          if (clean && encoder !== null) await keep(encoder.response());
        },
        ignored: Object.keys(request.body).filter((field) => !RESPONSES_FIELDS.has(field)),
      },
      openSink,
      this.deps.log,
    );
  }

  /** GET /responses/{id}. */
  async retrieve(caller: Caller, id: string): Promise<ResponseObject> {
    return (await this.find(caller, id)).response;
  }

  /** GET /responses/{id}/input_items. */
  async inputItems(caller: Caller, id: string, query: Record<string, unknown>): Promise<ItemList> {
    return listInputItems((await this.find(caller, id)).inputItems, query);
  }

  /** DELETE /responses/{id}: the content is removed at once. */
  async delete(caller: Caller, id: string): Promise<{ id: string; object: 'response'; deleted: true }> {
    if (!(await this.stored.delete(id, caller.workspaceId, this.clock.now()))) throw notFound(id);
    return { id, object: 'response', deleted: true };
  }

  private async find(caller: Caller, id: string) {
    const found = await this.stored.find(id, caller.workspaceId, this.clock.now());
    if (found === null) throw notFound(id);
    return found;
  }

  /** The conversation a new response continues: the earlier one's input items, then its output. */
  private async conversation(caller: Caller, id: string, now: Date): Promise<ResponseItem[]> {
    const found = await this.stored.find(id, caller.workspaceId, now);
    if (found === null) throw notFound(id, 'previous_response_id');
    return [...found.inputItems, ...found.response.output];
  }
}

/**
 * One answer for a response that never existed, was deleted, has expired or belongs to
 * another workspace: nobody learns which.
 */
function notFound(id: string, param: string | null = null): DomainError {
  return DomainError.notFound(
    `No stored response with id '${id}' exists for this workspace (responses are kept 30 days unless created with store: false, and deleted ones are gone).`,
    'response_not_found',
    param,
  );
}
