/** Spec 4.16: the upstream's realtime WebSocket endpoint, which the gateway dials and relays. */
import type { Operation, RealtimeConnection } from '../provider';
import type { OpenAiConnection } from './connection';
import { OPENAI_PARAMETERS } from './parameters';

/** WIRE-FORMATS 3.1: the base URL's scheme as a WebSocket's (https -> wss), `/realtime?model=`, the same bearer key. */
function connection(upstream: OpenAiConnection, model: string): RealtimeConnection {
  const url = new URL(`${upstream.baseUrl}/realtime`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('model', model);
  return { url: url.href, headers: { authorization: upstream.headers.authorization } };
}

export const realtime: Operation<'realtime', OpenAiConnection> = { parameters: OPENAI_PARAMETERS.realtime, calls: { realtime: connection } };
