/**
 * The `context-compression` plugin, OpenRouter's "middle-out" (spec 4.2 rule 9): when a prompt
 * does not fit, messages are dropped from the middle of the conversation, where they matter
 * least to the model, until it does. Never dropped: system and developer messages (the
 * instructions) and the latest user turn (the question being asked). An assistant message with
 * tool calls and the tool results answering it go or stay together: upstreams refuse a tool
 * result without its call, and a call without its results.
 */
import { isRecord } from '../json';
import { countChatPromptTokens, TokenBudget } from '../tokens';

export interface Compressed<M> {
  /** The messages kept, in their original order. */
  messages: M[];
  /** How many messages were dropped. */
  dropped: number;
  /** countChatPromptTokens of `messages`. */
  promptTokens: number;
  /** Whether `promptTokens` is within the budget; false when even the protected messages exceed it. */
  fits: boolean;
}

/** Consecutive messages that are kept or dropped as one. */
interface Unit {
  indices: number[];
  tokens: number;
  protected: boolean;
}

/**
 * Drops whole units from the middle of `messages` until the prompt is at most `budget` tokens.
 * Messages already within the budget come back as they are. The messages share one budget of
 * exact counting (`counting`), as they do in a count of the whole prompt.
 */
export function compressMessages<M>(messages: readonly M[], budget: number, counting = new TokenBudget()): Compressed<M> {
  // countChatPromptTokens is a sum over messages plus a fixed priming cost, so each message's
  // share can be counted once and the candidates summed without tokenising again.
  const priming = countChatPromptTokens([], counting);
  const cost = messages.map((m) => countChatPromptTokens([m], counting) - priming);
  let total = priming + cost.reduce((a, b) => a + b, 0);
  if (total <= budget) return { messages: [...messages], dropped: 0, promptTokens: total, fits: true };

  const units = unitsOf(messages, cost);
  const droppable = units.filter((u) => !u.protected);
  const dropped = new Set<number>();
  while (total > budget && droppable.length > 0) {
    // The candidate nearest the middle: the start (the setting) and the end (the recent
    // exchange) are what the model needs most.
    const [unit] = droppable.splice(Math.floor(droppable.length / 2), 1);
    unit.indices.forEach((i) => dropped.add(i));
    total -= unit.tokens;
  }
  return { messages: messages.filter((_, i) => !dropped.has(i)), dropped: dropped.size, promptTokens: total, fits: total <= budget };
}

function unitsOf(messages: readonly unknown[], cost: readonly number[]): Unit[] {
  const lastUser = messages.findLastIndex((m) => roleOf(m) === 'user');
  const units: Unit[] = [];
  for (let i = 0; i < messages.length; i++) {
    const indices = [i];
    // An assistant's tool calls take the tool results that follow them.
    if (roleOf(messages[i]) === 'assistant' && hasToolCalls(messages[i])) {
      while (i + 1 < messages.length && roleOf(messages[i + 1]) === 'tool') indices.push(++i);
    }
    const role = roleOf(messages[indices[0]]);
    units.push({
      indices,
      tokens: indices.reduce((sum, j) => sum + cost[j], 0),
      // The latest turn is the last user message and whatever follows it (tool rounds).
      protected: role === 'system' || role === 'developer' || (lastUser >= 0 && indices[indices.length - 1] >= lastUser),
    });
  }
  return units;
}

function roleOf(message: unknown): unknown {
  return isRecord(message) ? message.role : undefined;
}

function hasToolCalls(message: unknown): boolean {
  return isRecord(message) && Array.isArray(message.tool_calls) && message.tool_calls.length > 0;
}
