/**
 * The `response-healing` plugin (spec 4.2 rule 8): models asked for JSON sometimes answer with
 * JSON that is cut short or slightly off (a trailing comma, single quotes). `jsonrepair` turns
 * such text into valid JSON; what it cannot repair is left as the model wrote it.
 */
import { jsonrepair } from 'jsonrepair';
import { isRecord } from '../json';

/** `text` repaired into valid JSON, or unchanged when it already is valid or cannot be repaired. */
export function healJson(text: string): string {
  if (isValidJson(text)) return text;
  try {
    const repaired = jsonrepair(text);
    // jsonrepair can accept more than it should; only JSON that parses is an improvement.
    return isValidJson(repaired) ? repaired : text;
  } catch {
    return text;
  }
}

/** Whether a request asked for JSON output, the only case healing applies to. */
export function wantsJson(responseFormat: unknown): boolean {
  return isRecord(responseFormat) && (responseFormat.type === 'json_object' || responseFormat.type === 'json_schema');
}

/**
 * A chat completion whose string `choices[].message.content` are healed; the number of choices
 * changed, so the caller can tell. Anything else in the completion is left as it is.
 */
export function healChoices<T extends object>(completion: T): { completion: T; healed: number } {
  const original: unknown = (completion as { choices?: unknown }).choices;
  if (!Array.isArray(original)) return { completion, healed: 0 };
  let healed = 0;
  const choices = original.map((choice: unknown) => {
    if (!isRecord(choice) || !isRecord(choice.message) || typeof choice.message.content !== 'string') return choice;
    const content = healJson(choice.message.content);
    if (content === choice.message.content) return choice;
    healed++;
    return { ...choice, message: { ...choice.message, content } };
  });
  return { completion: { ...completion, choices }, healed };
}

function isValidJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
