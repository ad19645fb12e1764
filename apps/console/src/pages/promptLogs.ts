/**
 * The prompt-logs page's data (docs/api/settings-webhooks.md, "Prompt logging"): the setting's form to the body of
 * PATCH /v1/settings, and a log's request and answer printed as JSON with the server's media
 * placeholders picked out. Pure, so the rules are pinned by tests.
 */
import { ApiFailure } from '../api';
import type { PromptLog, PromptLoggingSetting } from '../records';

/** PROMPT_LOG_RETENTION_DAYS in libs/identity. */
export const RETENTION_DAYS = { min: 1, max: 30 } as const;

export interface PromptLoggingForm {
  enabled: boolean;
  /** As typed. */
  retentionDays: string;
}

export const promptLoggingFormOf = (setting: PromptLoggingSetting): PromptLoggingForm => ({
  enabled: setting.enabled,
  retentionDays: String(setting.retention_days),
});

/** The PATCH body; a retention the API would refuse is refused here with its `param`. */
export function promptLoggingBody(form: PromptLoggingForm): { prompt_logging: PromptLoggingSetting } {
  const text = form.retentionDays.trim();
  const days = Number(text);
  if (text === '' || !Number.isInteger(days) || days < RETENTION_DAYS.min || days > RETENTION_DAYS.max) {
    throw new ApiFailure(
      400,
      null,
      'prompt_logging.retention_days',
      `Keep logs for a whole number of days from ${RETENTION_DAYS.min} to ${RETENTION_DAYS.max}.`,
    );
  }
  return { prompt_logging: { enabled: form.enabled, retention_days: days } };
}

/**
 * What the server puts where an inline image or raw bytes were (IMAGE_PLACEHOLDER and
 * BINARY_PLACEHOLDER in libs/conversations/src/prompt-logs.ts): a whole string value.
 */
export const PLACEHOLDERS: Record<string, 'image' | 'binary'> = {
  '[image omitted]': 'image',
  '[binary content omitted]': 'binary',
};

/** Printed JSON in pieces: text, or a placeholder to show as a chip. */
export type Segment = { text: string } | { placeholder: 'image' | 'binary' };

/**
 * The value printed as `JSON.stringify(value, null, 2)` prints it, except that a string that is
 * a placeholder comes out as its own segment. A top-level string (a streamed answer's
 * event-stream text) is shown as it is, not as one long quoted line.
 */
export function printedSegments(value: unknown): Segment[] {
  const out: Segment[] = [];
  const text = (t: string) => {
    const last = out[out.length - 1];
    if (last && 'text' in last) last.text += t;
    else out.push({ text: t });
  };
  const print = (v: unknown, indent: string): void => {
    if (typeof v === 'string' && PLACEHOLDERS[v]) {
      out.push({ placeholder: PLACEHOLDERS[v] });
      return;
    }
    if (Array.isArray(v)) {
      if (v.length === 0) return text('[]');
      text('[\n');
      v.forEach((item, i) => {
        text(indent + '  ');
        // JSON prints what it cannot represent in an array as null.
        print(item === undefined || typeof item === 'function' ? null : item, indent + '  ');
        text(i < v.length - 1 ? ',\n' : '\n');
      });
      return text(`${indent}]`);
    }
    if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v).filter(([, x]) => x !== undefined && typeof x !== 'function');
      if (entries.length === 0) return text('{}');
      text('{\n');
      entries.forEach(([key, x], i) => {
        text(`${indent}  ${JSON.stringify(key)}: `);
        print(x, indent + '  ');
        text(i < entries.length - 1 ? ',\n' : '\n');
      });
      return text(`${indent}}`);
    }
    text(JSON.stringify(v) ?? 'null');
  };
  if (typeof value === 'string' && !PLACEHOLDERS[value]) return [{ text: value }];
  print(value, '');
  return out;
}

/** The model of a logged exchange: the one that answered when the answer says, else the one asked for. */
export function modelOf(log: Pick<PromptLog, 'request' | 'response'>): string | null {
  const field = (v: unknown) =>
    v !== null && typeof v === 'object' && typeof (v as { model?: unknown }).model === 'string' ? (v as { model: string }).model : null;
  return field(log.response) ?? field(log.request);
}
