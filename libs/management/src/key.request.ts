import { IsArray, IsIn, IsInt, IsNumber, IsString, Max, MaxLength, Min, ValidateBy, ValidateIf, type ValidationOptions } from 'class-validator';
import { isDomainPattern, isIpOrCidr, MAX_INTEGER_SETTING, MAX_LIST_ENTRIES, MAX_LIST_ENTRY_LENGTH } from '@svc/identity';
import { MAX_AMOUNT_USD } from '@svc/platform';

/**
 * The field may be left out, but not sent as null: class-validator's IsOptional lets null
 * through, and a null name or scope once became an event the identity read model could not hold.
 */
export function Omittable(options?: ValidationOptions): PropertyDecorator {
  return ValidateIf((_, value) => value !== undefined, options);
}

function EachMatches(test: (entry: string) => boolean, what: string, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'eachMatches',
      validator: {
        validate: (value: unknown) =>
          Array.isArray(value) && value.length <= MAX_LIST_ENTRIES && value.every((v) => typeof v === 'string' && v.length <= MAX_LIST_ENTRY_LENGTH && test(v)),
        defaultMessage: () => `at most ${MAX_LIST_ENTRIES} entries, each ${what} of at most ${MAX_LIST_ENTRY_LENGTH} characters.`,
      },
    },
    options,
  );
}

/**
 * The body of POST /v1/keys, PATCH /v1/keys/{id} and POST /admin/accounts/{id}/keys (spec
 * 4.19); every field optional. `null` clears a nullable field on PATCH; the others refuse it.
 */
export class KeyRequest {
  @Omittable()
  @IsString()
  @MaxLength(200)
  name?: string;

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsString()
  @MaxLength(200)
  project?: string | null;

  @Omittable()
  @IsIn(['live', 'test'], { message: 'environment must be live or test.' })
  environment?: 'live' | 'test';

  @Omittable()
  @IsIn(['full', 'read_only', 'management'], { message: 'scope must be full, read_only or management.' })
  scope?: 'full' | 'read_only' | 'management';

  /** USD per `limit_reset` period. */
  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsNumber({ allowNaN: false, allowInfinity: false }, { message: 'limit must be a number of USD or null.' })
  @Min(0)
  @Max(MAX_AMOUNT_USD, { message: `limit must be at most ${MAX_AMOUNT_USD} USD.` })
  limit?: number | null;

  @Omittable()
  @IsIn(['daily', 'weekly', 'monthly', 'never'], { message: 'limit_reset must be daily, weekly, monthly or never.' })
  limit_reset?: 'daily' | 'weekly' | 'monthly' | 'never';

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsArray()
  @EachMatches((m) => m.length > 0, 'a model id')
  allowed_models?: string[] | null;

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsArray()
  @EachMatches(isIpOrCidr, 'an IP address or CIDR range (IPv4 or IPv6)')
  allowed_ips?: string[] | null;

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsArray()
  @EachMatches(isDomainPattern, 'a domain such as example.com or *.example.com')
  allowed_referrers?: string[] | null;

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsInt()
  @Min(1)
  @Max(MAX_INTEGER_SETTING)
  rpm_limit?: number | null;

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsInt()
  @Min(1)
  @Max(MAX_INTEGER_SETTING)
  tpm_limit?: number | null;

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsInt()
  @Min(1)
  @Max(3650)
  expires_in_days?: number | null;
}

export class RotateKeyRequest {
  /** How long the old secret keeps working (0 = it stops now); at most 7 days. */
  @Omittable()
  @IsInt()
  @Min(0)
  @Max(7 * 24 * 3600)
  grace_period_seconds?: number;
}
