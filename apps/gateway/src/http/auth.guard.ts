import { createParamDecorator, Inject, Injectable, SetMetadata, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticate, authorize, type AuthCache, type Caller, findKeyBySecretHash, keyFromHeaders, type Operation, type SecretMatch } from '@svc/identity';
import { ApiError, CLOCK, type Clock, READ_DB, type SqlRunner } from '@svc/platform';
import { AUTH_CACHE } from '@svc/runtime';
import { type DeferredAdmission, RateLimitService } from '../edge/rate-limits';

type AuthenticatedRequest = FastifyRequest & { caller?: Caller; admission?: DeferredAdmission };

const OPERATION = 'svc:operation';
const ADMIT_WITH_PROMPT = 'svc:admit-with-prompt';

/** What a route does, checked against the key's scope (spec 5.3, 5.6). Every /v1 route says it. */
export const Requires = (operation: Operation) => SetMetadata(OPERATION, operation);

/**
 * A model call route whose use case counts its prompt in the metered pipeline with the tags the
 * edge gives it (EdgeResponses.serve): its admission waits for that count, and both are one
 * decision (DeferredAdmission). Only for routes whose every answer goes through the edge, and
 * whose body Fastify has read before the guard: a multipart route reads its file in the
 * handler, which a key over its limits must not make the gateway do.
 */
export const AdmitWithPrompt = () => SetMetadata(ADMIT_WITH_PROMPT, true);

/** The caller the guard authenticated for this request; undefined before the guard, or on a route without it. */
export function callerOf(request: FastifyRequest | undefined): Caller | undefined {
  return (request as AuthenticatedRequest | undefined)?.caller;
}

/** The admission the guard left to the prompt's count, while it may still be waiting for it. */
export function deferredAdmissionOf(request: FastifyRequest | undefined): DeferredAdmission | undefined {
  return (request as AuthenticatedRequest | undefined)?.admission;
}

/**
 * Spec 5: every /v1 endpoint takes the key as Bearer or x-api-key, then checks the key's
 * restrictions and scope. Keys come from the process's authentication cache, or the identity
 * projection when it is off; a revocation answers only once no process's cache still holds the
 * key (libs/projections/src/auth-cache.ts). Then the key's rate limits (spec 8), which only a
 * key that may make the call spends: here, or, on a route that counts its prompt in the
 * pipeline (AdmitWithPrompt), with that count.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  private readonly lookup: (hash: string) => Promise<SecretMatch | null>;

  constructor(
    @Inject(AUTH_CACHE) cache: AuthCache | null,
    @Inject(READ_DB) sql: SqlRunner,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly reflector: Reflector,
    private readonly rateLimits: RateLimitService,
  ) {
    this.lookup = cache ? (hash) => cache.find(hash) : (hash) => findKeyBySecretHash(sql, hash);
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const operation = this.reflector.getAllAndOverride<Operation | undefined>(OPERATION, [context.getHandler(), context.getClass()]);
    if (!operation) throw new Error(`route ${context.getClass().name}.${context.getHandler().name} does not declare what it requires`);
    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const secret = keyFromHeaders(request.raw.rawHeaders);
    this.rateLimits.refuseIfGuessing(request.ip);
    const caller = await authenticate(secret, this.lookup, this.clock.now()).catch(async (err: unknown) => {
      // A missing key is a mistake, not a guess.
      if (secret !== null && err instanceof ApiError && err.status === 401) await this.rateLimits.failedAuthentication(request.ip);
      throw err;
    });
    const header = (name: string) => (typeof request.headers[name] === 'string' ? (request.headers[name] as string) : undefined);
    const reply = context.switchToHttp().getResponse<FastifyReply>();
    try {
      authorize(caller, operation, { ip: request.ip, origin: header('origin'), referer: header('referer') });
    } catch (err) {
      // A refused key still learns where its windows stand (spec 8: every /v1 response).
      await this.rateLimits.reportWindows(caller, reply).catch(() => undefined);
      throw err;
    }
    request.caller = caller;
    if (operation === 'model_call' && this.reflector.get<boolean | undefined>(ADMIT_WITH_PROMPT, context.getHandler()) === true) {
      request.admission = this.rateLimits.defer(caller, reply);
    } else {
      await this.rateLimits.admit(caller, operation, reply);
    }
    return true;
  }

  /**
   * The caller of a request no route took (an unknown /v1 path), for its rate-limit headers;
   * null when it has no valid key. Counts no failed authentication: the 404 is the answer.
   */
  async callerOf(request: FastifyRequest): Promise<Caller | null> {
    try {
      return await authenticate(keyFromHeaders(request.raw.rawHeaders), this.lookup, this.clock.now());
    } catch {
      return null;
    }
  }
}

export const CallerParam = createParamDecorator((_: unknown, context: ExecutionContext): Caller => {
  const caller = context.switchToHttp().getRequest<AuthenticatedRequest>().caller;
  if (!caller) throw ApiError.authentication();
  return caller;
});

/** Who did it, for the audit log: the calling key, its account and the client's IP. */
export const ActorParam = createParamDecorator((_: unknown, context: ExecutionContext) => {
  const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
  const caller = request.caller;
  if (!caller) throw ApiError.authentication();
  return { actor: `key:${caller.keyId}`, actor_account: caller.createdBy, ip: request.ip };
});
