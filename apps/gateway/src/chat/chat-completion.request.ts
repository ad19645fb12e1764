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
  ValidateNested,
  type ValidationOptions,
} from 'class-validator';

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool'];

/** Message content: a string, an array of parts, or null (an assistant turn with tool calls). */
function IsMessageContent(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isMessageContent',
      validator: {
        validate: (value: unknown) => value === null || typeof value === 'string' || (Array.isArray(value) && value.every((p) => typeof p === 'object' && p !== null)),
        defaultMessage: () => 'content must be a string, an array of content parts, or null.',
      },
    },
    options,
  );
}

export class ChatMessage {
  @IsIn(ROLES, { message: `role must be one of ${ROLES.join(', ')}.` })
  role!: string;

  @IsOptional()
  @IsMessageContent()
  content?: string | object[] | null;

  @IsOptional()
  @IsString()
  name?: string;
}

/**
 * The fields of spec 4.2 whose shape is checked here. The controller then applies the request
 * rules (request-rules.ts, plugins/): fields spec 4.2 does not list are dropped and reported in
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

  /** The end user (spec 4.2), reported in activity. */
  @IsOptional()
  @IsString({ message: 'safety_identifier must be a string.' })
  safety_identifier?: string;

  @IsOptional()
  @IsString({ message: 'user must be a string.' })
  user?: string;

  /** Read by the plugin step (spec 4.2 rules 8 and 9), never forwarded upstream. */
  plugins?: unknown;
  transforms?: unknown;

  [extra: string]: unknown;
}
