/**
 * The prompt texts of a chat request as the guardrails' content filters read them (issue 44):
 * each message's text content, string or text parts, in order; and the messages rebuilt with
 * the texts the filters sent on (redacted), everything else as it was.
 */
import { enforceGuardrailContent, type GuardrailContentFinding } from '@svc/guardrails';
import type { Caller } from '@svc/identity';
import type { ChatRequestMessage } from './chat-request';

const isTextPart = (part: unknown): part is { type: 'text'; text: string } =>
  typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'text' && typeof (part as { text?: unknown }).text === 'string';

export function chatPromptTexts(messages: readonly ChatRequestMessage[]): string[] {
  const texts: string[] = [];
  for (const m of messages) {
    if (typeof m.content === 'string') texts.push(m.content);
    else if (Array.isArray(m.content)) for (const part of m.content) if (isTextPart(part)) texts.push(part.text);
  }
  return texts;
}

export function withChatPromptTexts(messages: readonly ChatRequestMessage[], texts: readonly string[]): ChatRequestMessage[] {
  let i = 0;
  return messages.map((m) => {
    if (typeof m.content === 'string') return { ...m, content: texts[i++] };
    if (Array.isArray(m.content)) return { ...m, content: m.content.map((part: unknown) => (isTextPart(part) ? { ...part, text: texts[i++] } : part)) };
    return m;
  });
}

/** The caller's guardrails' content filters over the messages: refused (400/413), or the messages to send on and what was found. */
export function guardChatMessages(caller: Caller, messages: ChatRequestMessage[]): { messages: ChatRequestMessage[]; findings: GuardrailContentFinding[] } {
  if (caller.guardrails.length === 0) return { messages, findings: [] };
  const { texts, findings } = enforceGuardrailContent(caller.guardrails, chatPromptTexts(messages), 'messages');
  const changed = findings.some((f) => f.action === 'redact');
  return { messages: changed ? withChatPromptTexts(messages, texts) : messages, findings };
}
