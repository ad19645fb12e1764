import type { Answered, MeteredCalls, RequestTags, StreamSink } from '@svc/metering';
import type { Nano } from '@svc/platform';

/** A call held and answered whose settlement is still to come (it will charge `MeteredCalls.chargeOf`), with its response. */
export interface AnsweredCall<Body> extends Omit<Answered<unknown>, 'answer'> {
  /** The response, given what the settlement charged. */
  present(charged: Nano): Body;
}

/** Settles an answered call (ARCHITECTURE section 5, step 9) and presents it with what was charged. */
export async function settled<Body>(calls: MeteredCalls, answered: AnsweredCall<Body>): Promise<Body> {
  return answered.present(await calls.settle(answered.metered, answered.target, answered.settlement));
}

/** What the edge records of a request, and the interface it came through (recorded on the generation). */
export interface CallTags extends RequestTags {
  endpoint?: string;
}

/**
 * A billed call's answer as an interface gives it: a JSON body, or a stream already flowing
 * into the sink the caller opened. Either way, the headers of the call (deprecation notices,
 * rate-limit windows, what the rules changed).
 */
export interface BilledAnswer<S extends StreamSink> {
  generationId: string;
  headers: Record<string, string>;
  json?: unknown;
  stream?: {
    body: S;
    /** Resolves true once the stream finished cleanly and was billed; false when it was cut short. */
    finished: Promise<boolean>;
    /**
     * Work the client must be able to rely on once it sees the end of the stream (the stored
     * response of /responses): the end of the stream waits for it.
     */
    ready?: Promise<unknown>;
  };
}
