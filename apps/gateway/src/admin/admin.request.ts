import { IsIn, IsNumber, IsString, Matches, Max, MaxLength, Min, MinLength, NotEquals, ValidateIf } from 'class-validator';
import { MAX_AMOUNT_USD } from '@svc/platform';
import { KeyRequest, Omittable } from '@svc/management';

const atMostMax = (field: string) => ({ message: `${field} must be at most ${MAX_AMOUNT_USD} USD.` });

export class CreateAccountRequest {
  @Omittable()
  @IsNumber({ allowNaN: false, allowInfinity: false }, { message: 'initial_credits_usd must be a number of USD.' })
  @Min(0)
  @Max(MAX_AMOUNT_USD, atMostMax('initial_credits_usd'))
  initial_credits_usd?: number;
}

export class AddCreditsRequest {
  @IsNumber({ allowNaN: false, allowInfinity: false }, { message: 'amount_usd must be a number of USD.' })
  @Min(0.000000001, { message: 'amount_usd must be positive.' })
  @Max(MAX_AMOUNT_USD, atMostMax('amount_usd'))
  amount_usd!: number;
}

/** Same body as POST /v1/keys; `org_id` creates the key inside an organization the account belongs to. */
export class AdminKeyRequest extends KeyRequest {
  @Omittable()
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  org_id?: string;
}

export class CreateOrgRequest {
  @IsString({ message: 'owner_account_id must be a string.' })
  @MinLength(1)
  @MaxLength(200)
  owner_account_id!: string;

  @Omittable()
  @IsString()
  @MaxLength(200)
  name?: string;
}

export class MemberRequest {
  @IsString({ message: 'account_id must be a string.' })
  @MinLength(1)
  @MaxLength(200)
  account_id!: string;

  @IsIn(['admin', 'member'], { message: 'role must be admin or member (the owner is set when the organization is created).' })
  role!: 'admin' | 'member';
}

export class MemberRoleRequest {
  @IsIn(['admin', 'member'], { message: 'role must be admin or member.' })
  role!: 'admin' | 'member';
}

export class UpdateAccountRequest {
  /** The account's daily spend limit in USD (resets 00:00 UTC); null removes it. */
  @ValidateIf((_, v) => v !== null)
  @IsNumber({ allowNaN: false, allowInfinity: false }, { message: 'daily_limit_usd must be a number of USD or null.' })
  @Min(0, { message: 'daily_limit_usd must not be negative.' })
  @Max(MAX_AMOUNT_USD, atMostMax('daily_limit_usd'))
  daily_limit_usd!: number | null;
}

/** BYOK: the account's own key of a provider of the catalog. */
export class ProviderKeyRequest {
  @IsString({ message: 'api_key must be a string.' })
  @MaxLength(1000, { message: 'api_key must be at most 1000 characters.' })
  // It goes into an Authorization header: whitespace or control characters would break it.
  @Matches(/^[\x21-\x7e]+$/, { message: 'api_key must be non-empty printable ASCII without spaces.' })
  api_key!: string;
}

/**
 * Issue 23, corrections: an operator's credit note (positive: money given back) or adjustment
 * (either sign). `operator` names the person, since the admin token is shared; `adjustment_id`
 * makes a retry safe.
 */
export class AdjustmentRequest {
  @IsNumber({ allowNaN: false, allowInfinity: false }, { message: 'amount_usd must be a number of USD (negative lowers the balance).' })
  @NotEquals(0, { message: 'amount_usd must not be zero.' })
  @Min(-MAX_AMOUNT_USD, { message: `amount_usd must be at least -${MAX_AMOUNT_USD} USD.` })
  @Max(MAX_AMOUNT_USD, atMostMax('amount_usd'))
  amount_usd!: number;

  @IsIn(['credit_note', 'adjustment'], { message: 'kind must be credit_note (positive, money given back) or adjustment (either sign).' })
  kind!: 'credit_note' | 'adjustment';

  @IsString({ message: 'reason must be a string.' })
  @MinLength(1, { message: 'reason must not be empty: say why.' })
  @MaxLength(500, { message: 'reason must be at most 500 characters.' })
  reason!: string;

  @IsString({ message: 'operator must be a string naming who makes the correction.' })
  @MinLength(1, { message: 'operator must not be empty: name who makes the correction.' })
  @MaxLength(200, { message: 'operator must be at most 200 characters.' })
  operator!: string;

  @Omittable()
  @IsString({ message: 'adjustment_id must be a string.' })
  @Matches(/^[A-Za-z0-9_.:-]{1,100}$/, { message: 'adjustment_id must be 1 to 100 letters, digits or _ . : -' })
  adjustment_id?: string;
}
