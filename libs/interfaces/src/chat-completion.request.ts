import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  IsString,
  Max,
  Min,
  ValidateBy,
  ValidateIf,
  ValidateNested,
  type ValidationOptions,
} from 'class-validator';
import { isRecord } from '@svc/providers';

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool'];

/**
 * What is wrong with a content part (issue 15.6: unknown part types and unchecked file parts
 * reached the upstream and were billed); null when it is one of OpenAI's part shapes. A
 * `file_id` names a file of the Files API, which this service does not have yet.
 */
function partProblem(part: unknown): string | null {
  if (!isRecord(part)) return 'is not an object';
  switch (part.type) {
    case 'text':
      return typeof part.text === 'string' ? null : 'text must be a string';
    case 'image_url':
      return isRecord(part.image_url) && typeof part.image_url.url === 'string' ? null : 'image_url must be {url: string}';
    case 'input_audio':
      return isRecord(part.input_audio) && typeof part.input_audio.data === 'string' && typeof part.input_audio.format === 'string'
        ? null
        : 'input_audio must be {data, format}';
    case 'file': {
      const file = part.file;
      if (!isRecord(file)) return 'file must be an object';
      if (file.file_id !== undefined) return 'file.file_id is not supported (this service has no Files API yet); send the file inline as file.file_data';
      if (typeof file.file_data !== 'string' || !/^data:[\w.+-]+\/[\w.+-]+;base64,[A-Za-z0-9+/=\s]*$/.test(file.file_data)) {
        return 'file.file_data must be a base64 data URL (data:<media type>;base64,...)';
      }
      return file.filename === undefined || typeof file.filename === 'string' ? null : 'file.filename must be a string';
    }
    default:
      return `has an unknown type ${JSON.stringify(part.type)} (text, image_url, input_audio or file)`;
  }
}

/** Message content: a string, an array of known parts, or null (an assistant turn with tool calls). */
function IsMessageContent(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isMessageContent',
      validator: {
        validate: isContent,
        defaultMessage: (args) => {
          const value = args?.value;
          if (!Array.isArray(value)) return 'content must be a string, an array of content parts, or null.';
          const i = value.findIndex((p) => partProblem(p) !== null);
          return `content part ${i} ${partProblem(value[i])}.`;
        },
      },
    },
    options,
  );
}

/** A value checked by `test`, explained by `what` (`must be ...`). */
function Is(test: (value: unknown) => boolean, what: string, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    { name: 'is', validator: { validate: (value: unknown) => test(value), defaultMessage: (args) => `${args?.property} must be ${what}.` } },
    options,
  );
}

const isNumberIn = (min: number, max: number) => (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max;
const isFunctionTool = (t: unknown) =>
  isRecord(t) &&
  t.type === 'function' &&
  isRecord(t.function) &&
  typeof t.function.name === 'string' &&
  t.function.name !== '' &&
  (t.function.parameters === undefined || isRecord(t.function.parameters));
const isToolChoice = (v: unknown) =>
  v === 'none' || v === 'auto' || v === 'required' || (isRecord(v) && v.type === 'function' && isRecord(v.function) && typeof v.function.name === 'string');
const isResponseFormat = (v: unknown) =>
  isRecord(v) &&
  (v.type === 'text' ||
    v.type === 'json_object' ||
    (v.type === 'json_schema' &&
      isRecord(v.json_schema) &&
      typeof v.json_schema.name === 'string' &&
      (v.json_schema.schema === undefined || isRecord(v.json_schema.schema))));
const EFFORTS = ['minimal', 'low', 'medium', 'high'];
const REASONING_EFFORTS = [...EFFORTS, 'none'];
const isReasoning = (v: unknown) =>
  isRecord(v) &&
  (v.effort === undefined || EFFORTS.includes(v.effort as string)) &&
  (v.max_tokens === undefined || (Number.isInteger(v.max_tokens) && (v.max_tokens as number) >= 0)) &&
  (v.exclude === undefined || typeof v.exclude === 'boolean') &&
  (v.enabled === undefined || typeof v.enabled === 'boolean');
const isStop = (v: unknown) => typeof v === 'string' || (Array.isArray(v) && v.length <= 4 && v.every((s) => typeof s === 'string'));
const isLogitBias = (v: unknown) => isRecord(v) && Object.entries(v).every(([token, bias]) => /^\d+$/.test(token) && isNumberIn(-100, 100)(bias));

const isString = (v: unknown) => typeof v === 'string';
const isBoolean = (v: unknown) => typeof v === 'boolean';
const isIntFrom =
  (min: number, max = Infinity) =>
  (v: unknown) =>
    Number.isInteger(v) && (v as number) >= min && (v as number) <= max;
const isContent = (v: unknown) => v === null || typeof v === 'string' || (Array.isArray(v) && v.every((p) => partProblem(p) === null));
const isToolCalls = (v: unknown) =>
  Array.isArray(v) &&
  v.every(
    (c) => isRecord(c) && typeof c.id === 'string' && isRecord(c.function) && typeof c.function.name === 'string' && typeof c.function.arguments === 'string',
  );
const isTools = (v: unknown) => Array.isArray(v) && v.length <= 128 && v.every(isFunctionTool);
const isModalities = (v: unknown) => Array.isArray(v) && v.every((m) => m === 'text' || m === 'audio' || m === 'image');
const isPrediction = (v: unknown) => isRecord(v) && v.type === 'content';
const isSeed = (v: unknown) => Number.isSafeInteger(v);
const isUsageOption = (v: unknown) => isRecord(v) && (v.include === undefined || typeof v.include === 'boolean');

export class ChatMessage {
  @IsIn(ROLES, { message: `role must be one of ${ROLES.join(', ')}.` })
  role!: string;

  @IsOptional()
  @IsMessageContent()
  content?: string | object[] | null;

  @IsOptional()
  @IsString()
  name?: string;

  /** A tool message answers one call of the assistant turn before it. */
  @ValidateIf((m: ChatMessage) => m.role === 'tool')
  @IsString({ message: 'tool_call_id must be the id of the tool call this message answers.' })
  @IsNotEmpty({ message: 'tool_call_id must be the id of the tool call this message answers.' })
  tool_call_id?: string;

  @IsOptional()
  @Is(isToolCalls, 'an array of {id, type: "function", function: {name, arguments}}')
  tool_calls?: object[];
}

/**
 * The fields of spec 4.2 whose shape is checked here. The controller then applies the request
 * rules (libs/billing: chat-rules.ts, chat-plugins.ts): fields spec 4.2 does not list are dropped and reported in
 * `x-svc-ignored-params`; the other listed fields pass through to the provider.
 */
export class ChatCompletionRequest {
  @IsString({ message: 'model must be a string.' })
  @IsNotEmpty({ message: 'model must not be empty.' })
  model!: string;

  @IsArray({ message: 'messages must be an array.' })
  @ArrayNotEmpty({ message: 'messages must contain at least one message.' })
  @ValidateNested({ each: true })
  @Type(() => ChatMessage)
  messages!: ChatMessage[];

  /** Spec 4.2 rule 6 and section 8: up to 2 fallback models, tried in order after `model`. */
  @IsOptional()
  @IsArray({ message: 'models must be an array of model ids.' })
  @ArrayMaxSize(2, { message: 'models lists at most 2 fallback models.' })
  @IsString({ each: true, message: 'models must be an array of model ids.' })
  models?: string[];

  @IsOptional()
  @IsInt({ message: 'max_tokens must be an integer.' })
  @Min(1, { message: 'max_tokens must be at least 1.' })
  max_tokens?: number;

  @IsOptional()
  @IsInt({ message: 'max_completion_tokens must be an integer.' })
  @Min(1, { message: 'max_completion_tokens must be at least 1.' })
  max_completion_tokens?: number;

  /** Spec 4.2 rule 2: n must be 1. */
  @IsOptional()
  @IsInt({ message: 'n must be 1.' })
  @Min(1, { message: 'n must be 1.' })
  @Max(1, { message: 'n must be 1.' })
  n?: number;

  @IsOptional()
  @IsBoolean({ message: 'stream must be a boolean.' })
  stream?: boolean;

  @IsOptional()
  @IsObject({ message: 'stream_options must be an object.' })
  stream_options?: { include_usage?: boolean };

  /**
   * OpenRouter's usage accounting (issue 41 item 1): `include: true` is `stream_options.include_usage`
   * (applyRules turns it into that); a non-streamed answer always has its usage.
   */
  @IsOptional()
  @Is(isUsageOption, '{include?: boolean}')
  usage?: { include?: boolean };

  /** The end user (spec 4.2), reported in activity. */
  @IsOptional()
  @IsString({ message: 'safety_identifier must be a string.' })
  safety_identifier?: string;

  @IsOptional()
  @IsString({ message: 'user must be a string.' })
  user?: string;

  // Issue 15.6: every typed field of spec 4.2 is checked (400 naming it, nothing billed), as
  // OpenAI does; none is forwarded as something the upstream must guess at.
  @IsOptional()
  @Is(isNumberIn(0, 2), 'a number from 0 to 2')
  temperature?: number;

  @IsOptional()
  @Is(isNumberIn(0, 1), 'a number from 0 to 1')
  top_p?: number;

  @IsOptional()
  @Is(isIntFrom(0), 'an integer of at least 0')
  top_k?: number;

  @IsOptional()
  @Is(isNumberIn(0, 1), 'a number from 0 to 1')
  min_p?: number;

  @IsOptional()
  @Is(isNumberIn(-2, 2), 'a number from -2 to 2')
  presence_penalty?: number;

  @IsOptional()
  @Is(isNumberIn(-2, 2), 'a number from -2 to 2')
  frequency_penalty?: number;

  @IsOptional()
  @Is(isNumberIn(0, 2), 'a number from 0 to 2')
  repetition_penalty?: number;

  @IsOptional()
  @Is(isSeed, 'an integer')
  seed?: number;

  @IsOptional()
  @Is(isStop, 'a string or an array of at most 4 strings')
  stop?: string | string[];

  @IsOptional()
  @Is(isLogitBias, 'an object of token ids to numbers from -100 to 100')
  logit_bias?: Record<string, number>;

  @IsOptional()
  @Is(isTools, 'an array of at most 128 {type: "function", function: {name, description?, parameters?}}')
  tools?: object[];

  @IsOptional()
  @Is(isToolChoice, '"none", "auto", "required" or {type: "function", function: {name}}')
  tool_choice?: unknown;

  @IsOptional()
  @IsBoolean({ message: 'parallel_tool_calls must be a boolean.' })
  parallel_tool_calls?: boolean;

  @IsOptional()
  @Is(isResponseFormat, '{type: "text"}, {type: "json_object"} or {type: "json_schema", json_schema: {name, schema?, strict?}}')
  response_format?: object;

  @IsOptional()
  @Is(isReasoning, '{effort?: minimal | low | medium | high, max_tokens?, exclude?, enabled?}')
  reasoning?: object;

  @IsOptional()
  @IsIn(REASONING_EFFORTS, { message: 'reasoning_effort must be minimal, low, medium, high or none.' })
  reasoning_effort?: string;

  @IsOptional()
  @IsBoolean({ message: 'include_reasoning must be a boolean.' })
  include_reasoning?: boolean;

  @IsOptional()
  @IsBoolean({ message: 'logprobs must be a boolean.' })
  logprobs?: boolean;

  @IsOptional()
  @Is(isIntFrom(0, 20), 'an integer from 0 to 20')
  top_logprobs?: number;

  @IsOptional()
  @IsString({ message: 'prompt_cache_key must be a string.' })
  prompt_cache_key?: string;

  @IsOptional()
  @Is(isModalities, 'an array of text, audio or image')
  modalities?: string[];

  @IsOptional()
  @Is(isRecord, 'an object')
  provider?: object;

  @IsOptional()
  @Is(isPrediction, '{type: "content", content}')
  prediction?: object;

  /** Read by the plugin step (spec 4.2 rules 8 and 9), never forwarded upstream. */
  plugins?: unknown;
  transforms?: unknown;

  [extra: string]: unknown;
}

/**
 * The checks of ChatMessage as plain predicates, for the fast path below: a field either
 * absent or passing its check. tool_call_id is left to class-validator unless it is a string.
 */
const MESSAGE_FIELDS: Record<string, (v: unknown) => boolean> = {
  role: (v) => ROLES.includes(v as string),
  content: isContent,
  name: isString,
  tool_call_id: isString,
  tool_calls: isToolCalls,
};

/** The checks of ChatCompletionRequest's fields as plain predicates (the same functions where it has them). */
const REQUEST_FIELDS: Record<string, (v: unknown) => boolean> = {
  model: (v) => typeof v === 'string' && v !== '',
  messages: (v) => Array.isArray(v) && v.length > 0 && v.every(isSurelyValidMessage),
  models: (v) => Array.isArray(v) && v.length <= 2 && v.every(isString),
  max_tokens: isIntFrom(1),
  max_completion_tokens: isIntFrom(1),
  n: isIntFrom(1, 1),
  stream: isBoolean,
  stream_options: isRecord,
  usage: isUsageOption,
  safety_identifier: isString,
  user: isString,
  temperature: isNumberIn(0, 2),
  top_p: isNumberIn(0, 1),
  top_k: isIntFrom(0),
  min_p: isNumberIn(0, 1),
  presence_penalty: isNumberIn(-2, 2),
  frequency_penalty: isNumberIn(-2, 2),
  repetition_penalty: isNumberIn(0, 2),
  seed: isSeed,
  stop: isStop,
  logit_bias: isLogitBias,
  tools: isTools,
  tool_choice: isToolChoice,
  parallel_tool_calls: isBoolean,
  response_format: isResponseFormat,
  reasoning: isReasoning,
  reasoning_effort: (v) => REASONING_EFFORTS.includes(v as string),
  include_reasoning: isBoolean,
  logprobs: isBoolean,
  top_logprobs: isIntFrom(0, 20),
  prompt_cache_key: isString,
  modalities: isModalities,
  provider: isRecord,
  prediction: isPrediction,
  // Not checked by class-validator: the plugin step reads them (spec 4.2 rules 8 and 9).
  plugins: () => true,
  transforms: () => true,
};

function isSurelyValidMessage(message: unknown): boolean {
  if (!isRecord(message) || message.role === 'tool') return false;
  for (const field of Object.keys(message)) {
    if (!Object.hasOwn(MESSAGE_FIELDS, field) || !MESSAGE_FIELDS[field](message[field])) return false;
  }
  return message.role !== undefined;
}

/**
 * True only for a chat request ChatCompletionRequest's checks pass: every field one they know,
 * and passing its check. Anything unusual (a field they do not know, a null, a tool message)
 * is false, and left to class-validator to decide and explain (see fastBodyValidation).
 */
export function isSurelyValidChatRequest(body: unknown): boolean {
  if (!isRecord(body) || Object.getPrototypeOf(body) !== Object.prototype) return false;
  for (const field of Object.keys(body)) {
    if (!Object.hasOwn(REQUEST_FIELDS, field) || !REQUEST_FIELDS[field](body[field])) return false;
  }
  return body.model !== undefined && body.messages !== undefined;
}
