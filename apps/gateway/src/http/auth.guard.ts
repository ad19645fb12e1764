import { createParamDecorator, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { authenticate, keyFromHeaders, type Caller } from '../../../../libs/identity/src/authenticate';
import { ApiError } from '../../../../libs/platform/src/errors';
import type { SqlRunner } from '../../../../libs/platform/src/sql';
import { READ_DB } from '../../../../libs/platform/src/tokens';
import { findKeyByHash } from '../../../../libs/projections/src';

type AuthenticatedRequest = FastifyRequest & { caller?: Caller };

/** Spec 5: every /v1 endpoint takes the key as Bearer or x-api-key. */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(@Inject(READ_DB) private readonly sql: SqlRunner) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    request.caller = await authenticate(keyFromHeaders(request.headers), (hash) => findKeyByHash(this.sql, hash));
    return true;
  }
}

/** Spec 5.3: a management key provisions keys and presets but cannot call models. */
export function requireModelScope(caller: Caller): void {
  if (caller.scope === 'management') throw ApiError.permission('A management key cannot call models; use a full key.', 'management_key_used_for_model_call');
  if (caller.scope === 'read_only') throw ApiError.permission('A read-only key cannot make billed calls.', 'read_only_key');
}

export const CallerParam = createParamDecorator((_: unknown, context: ExecutionContext): Caller => {
  const caller = context.switchToHttp().getRequest<AuthenticatedRequest>().caller;
  if (!caller) throw ApiError.authentication();
  return caller;
});
