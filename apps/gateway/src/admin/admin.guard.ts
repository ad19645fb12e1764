import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { createHash, timingSafeEqual } from 'node:crypto';
import { ApiError } from '@svc/platform';
import { ADMIN_TOKEN } from '@svc/runtime';

const digest = (text: string) => createHash('sha256').update(text).digest();

/** The operator and companion-app API: `Authorization: Bearer $SVC_ADMIN_TOKEN`, compared in constant time. */
@Injectable()
export class AdminGuard implements CanActivate {
  constructor(@Inject(ADMIN_TOKEN) private readonly token: string | null) {}

  canActivate(context: ExecutionContext): boolean {
    const token = this.token;
    if (token === null) throw ApiError.authentication('The operator API is disabled: set SVC_ADMIN_TOKEN.', 'admin_api_disabled');
    const header = context.switchToHttp().getRequest<FastifyRequest>().headers.authorization;
    const given = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined;
    // Comparing digests keeps the comparison constant-time whatever the lengths.
    if (given === undefined || !timingSafeEqual(digest(given), digest(token))) {
      throw ApiError.authentication('Invalid admin token.', 'invalid_admin_token');
    }
    return true;
  }
}
