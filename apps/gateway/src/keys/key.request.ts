import {
  IsArray,
  IsIn,
  IsInt,
  IsNumber,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  ValidateBy,
  ValidateIf,
  type ValidationOptions,
} from 'class-validator';
import { isDomainPattern, isIpOrCidr } from '../../../../libs/identity/src/restrictions';

function EachMatches(test: (entry: string) => boolean, what: string, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'eachMatches',
      validator: {
        validate: (value: unknown) => Array.isArray(value) && value.every((v) => typeof v === 'string' && test(v)),
        defaultMessage: () => `every entry must be ${what}.`,
      },
    },
    options,
  );
}

/**
 * The body of POST /v1/keys, PATCH /v1/keys/{id} and POST /admin/accounts/{id}/keys (spec
 * 4.19); every field optional. `null` clears a nullable field on PATCH.
 */
export class KeyRequest {
  @IsOptional()
  @IsString()
  @MaxLength(200)
  name?: string;

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsString()
  @MaxLength(200)
  project?: string | null;

  @IsOptional()
  @IsIn(['live', 'test'], { message: 'environment must be live or test.' })
  environment?: 'live' | 'test';

  @IsOptional()
  @IsIn(['full', 'read_only', 'management'], { message: 'scope must be full, read_only or management.' })
  scope?: 'full' | 'read_only' | 'management';

  /** USD per `limit_reset` period. */
  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsNumber({ allowNaN: false, allowInfinity: false }, { message: 'limit must be a number of USD or null.' })
  @Min(0)
  limit?: number | null;

  @IsOptional()
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
  rpm_limit?: number | null;

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsInt()
  @Min(1)
  tpm_limit?: number | null;

  @ValidateIf((_, v) => v !== undefined && v !== null)
  @IsInt()
  @Min(1)
  @Max(3650)
  expires_in_days?: number | null;
}

export class RotateKeyRequest {
  /** How long the old secret keeps working (0 = it stops now); at most 7 days. */
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(7 * 24 * 3600)
  grace_period_seconds?: number;
}
