import { Inject, Injectable } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { randomUUID } from 'node:crypto';
import { CATALOG, type Catalog, parseModelId } from '@svc/catalog';
import type { EventMetadata } from '@svc/eventstore';
import type { Caller, KeyRecord } from '@svc/identity';
import {
  canManageKey,
  DEFAULT_KEY_SETTINGS,
  generateKeySecret,
  hashKeySecret,
  IdentityCommand,
  type KeyCommand,
  type KeyManager,
  type KeySettings,
  secretHint,
  getKey,
  keyUsage,
  type KeyUsage,
  listKeys,
  orgRoleOf,
} from '@svc/identity';
import { DomainError, CLOCK, type Clock, CONFIG, effectiveRateLimits, nanoToUsd, type RateLimitDefaults, READ_DB, usdToNano } from '@svc/platform';
import { windowResetsAt } from '@svc/ledger';
import { PROJECTIONS, ReadYourWrites } from '@svc/projections';
import type { Config, SqlRunner } from '@svc/platform';
import type { ProjectionRunner } from '@svc/projections';
import type { KeyRequest } from './key.request';

/** Where a new key lives and who pays for it. */
export interface KeyOwner {
  /** Billed: the account itself, or the organization's owner. */
  accountId: string;
  workspaceId: string;
  orgId: string | null;
  createdBy: string;
}

const DAY_MS = 24 * 3600 * 1000;

/** Key provisioning (spec 4.19) for management keys and for the operator API. */
@Injectable()
export class KeysService {
  constructor(
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(CONFIG) private readonly config: Pick<Config, 'rateLimits'>,
    @Inject(PROJECTIONS) private readonly projections: Pick<ProjectionRunner, 'waitUntilVisible'>,
    private readonly commands: CommandBus,
    private readonly reads: ReadYourWrites,
    @Inject(CATALOG) private readonly catalog: Pick<Catalog, 'get'>,
  ) {}

  /** The account and workspace behind a management key, with its current organization role. */
  async managerOf(caller: Caller): Promise<KeyManager> {
    const orgRole = caller.orgId === null ? null : await orgRoleOf(this.sql, caller.orgId, caller.createdBy);
    return { accountId: caller.createdBy, workspaceId: caller.workspaceId, orgRole };
  }

  /** The owner of keys a management key creates: its own workspace and creator. */
  ownerFor(caller: Caller): KeyOwner {
    return { accountId: caller.accountId, workspaceId: caller.workspaceId, orgId: caller.orgId, createdBy: caller.createdBy };
  }

  async create(owner: KeyOwner, body: KeyRequest, metadata: EventMetadata): Promise<{ record: KeyRecord; secret: string }> {
    const now = this.clock.now();
    const settings = this.settings(body, now);
    const secret = generateKeySecret(settings.environment);
    const keyId = `key_${randomUUID().replaceAll('-', '')}`;
    await this.execute(
      keyId,
      {
        type: 'CreateKey',
        keyId,
        accountId: owner.accountId,
        workspaceId: owner.workspaceId,
        orgId: owner.orgId,
        createdBy: owner.createdBy,
        settings,
        secretHash: hashKeySecret(secret),
        secretHint: secretHint(secret),
      },
      metadata,
    );
    return { record: (await getKey(this.sql, keyId))!, secret };
  }

  /** Members see the keys they created; owners and admins see the whole workspace. */
  async list(manager: KeyManager): Promise<KeyRecord[]> {
    const seesAll = manager.orgRole === null || manager.orgRole === 'owner' || manager.orgRole === 'admin';
    return listKeys(this.sql, manager.workspaceId, seesAll ? undefined : manager.accountId);
  }

  async get(manager: KeyManager, keyId: string): Promise<KeyRecord> {
    const key = await getKey(this.sql, keyId);
    // A key of another workspace is as unknown as a missing one.
    if (!key || key.workspaceId !== manager.workspaceId) throw DomainError.notFound(`No key with id '${keyId}'.`, 'key_not_found', 'id');
    if (!canManageKey(manager, key)) {
      throw DomainError.forbidden('Organization members manage only the keys they created; owners and admins manage all.', 'not_key_owner');
    }
    return key;
  }

  async update(manager: KeyManager, keyId: string, body: KeyRequest, metadata: EventMetadata): Promise<KeyRecord> {
    const key = await this.get(manager, keyId);
    const changes = this.settings(body, this.clock.now(), key);
    await this.execute(keyId, { type: 'UpdateKey', changes }, metadata);
    return (await getKey(this.sql, keyId))!;
  }

  async rotate(manager: KeyManager, keyId: string, graceSeconds: number, metadata: EventMetadata): Promise<{ record: KeyRecord; secret: string }> {
    const key = await this.get(manager, keyId);
    const secret = generateKeySecret(key.environment);
    await this.execute(keyId, { type: 'RotateKey', secretHash: hashKeySecret(secret), secretHint: secretHint(secret), graceSeconds }, metadata);
    return { record: (await getKey(this.sql, keyId))!, secret };
  }

  async revoke(manager: KeyManager, keyId: string, metadata: EventMetadata): Promise<KeyRecord> {
    await this.get(manager, keyId);
    await this.execute(keyId, { type: 'RevokeKey' }, metadata);
    return (await getKey(this.sql, keyId))!;
  }

  /** The key record of spec 2.3 and 4.19: settings, limits, usage per period and rate limits. */
  async present(keys: KeyRecord[]): Promise<Record<string, unknown>[]> {
    // Usage includes the caller's own calls made through this process just before.
    await Promise.all([...new Set(keys.map((k) => k.accountId))].map((account) => this.reads.settle(account, 'key_usage')));
    const now = this.clock.now();
    const usage = await keyUsage(
      this.sql,
      keys.map((k) => k.keyId),
      now,
    );
    return keys.map((k) => presentKey(k, usage.get(k.keyId)!, now, this.config.rateLimits));
  }

  /**
   * Appends, then waits until the identity read model has applied the change and no gateway's
   * authentication cache still holds the key as it was: once the request returns, every gateway
   * process sharing the store sees it (revocation included).
   */
  private async execute(keyId: string, command: KeyCommand, metadata: EventMetadata): Promise<void> {
    const result = await this.commands.execute(new IdentityCommand(keyId, command, metadata));
    if (result.appended) await this.projections.waitUntilVisible(result.appended.position, ['identity']);
  }

  /** Request fields to recorded settings: all of them on create, the given ones on update. */
  private settings(body: KeyRequest, now: Date): KeySettings;
  private settings(body: KeyRequest, now: Date, current: KeySettings): Partial<KeySettings>;
  private settings(body: KeyRequest, now: Date, current?: KeySettings): KeySettings | Partial<KeySettings> {
    const environment = body.environment ?? current?.environment ?? DEFAULT_KEY_SETTINGS.environment;
    const defaults = this.config.rateLimits[environment];
    // Spec 5.4 and 8: a key can only lower its rate limits.
    if (body.rpm_limit != null && body.rpm_limit > defaults.requests_per_minute) {
      throw DomainError.invalid(`rpm_limit can only lower the default of ${defaults.requests_per_minute} requests per minute.`, 'rpm_limit');
    }
    if (body.tpm_limit != null && body.tpm_limit > defaults.tokens_per_minute) {
      throw DomainError.invalid(`tpm_limit can only lower the default of ${defaults.tokens_per_minute} tokens per minute.`, 'tpm_limit');
    }
    let limitNano: string | null | undefined;
    if (body.limit !== undefined) {
      try {
        limitNano = body.limit === null ? null : usdToNano(body.limit).toString();
      } catch {
        throw DomainError.invalid('limit must be a non-negative USD amount with at most 9 decimals.', 'limit');
      }
    }
    const given: Partial<KeySettings> = {
      name: body.name,
      project: body.project,
      environment: body.environment,
      scope: body.scope,
      limit_nano: limitNano,
      limit_reset: body.limit_reset,
      allowed_models: body.allowed_models == null ? body.allowed_models : this.allowedModels(body.allowed_models),
      allowed_ips: body.allowed_ips,
      allowed_referrers: body.allowed_referrers,
      rpm_limit: body.rpm_limit,
      tpm_limit: body.tpm_limit,
      expires_at:
        body.expires_in_days === undefined
          ? undefined
          : body.expires_in_days === null
            ? null
            : new Date(now.getTime() + body.expires_in_days * DAY_MS).toISOString(),
    };
    const changes = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as Partial<KeySettings>;
    if (current) return changes;
    return { ...DEFAULT_KEY_SETTINGS, ...changes };
  }

  /**
   * Spec 4.19 `allowed_models` as the catalog ids the key may call (issue 41 item 11): an id the
   * catalog does not know would make a key that can call nothing, so it is refused, naming every
   * such entry. Requests are checked against the catalog id they resolve to (spec 1: suffixes
   * choose a provider, a preset applies settings, neither is another model), so an entry with
   * routing suffixes or a `@preset/<slug>` after its model is kept as that model's id; a preset
   * alone names no model to allow.
   */
  private allowedModels(entries: readonly string[]): string[] {
    const ids: string[] = [];
    const unknown: string[] = [];
    for (const entry of entries) {
      const id = this.catalogIdOf(entry);
      if (id === null) unknown.push(entry);
      else if (!ids.includes(id)) ids.push(id);
    }
    if (unknown.length > 0) {
      const shown = unknown
        .slice(0, 10)
        .map((id) => JSON.stringify(id))
        .join(', ');
      const more = unknown.length > 10 ? ` and ${unknown.length - 10} more` : '';
      const presets = unknown.some((id) => id.startsWith(PRESET_MARK)) ? ' A preset is not a model: list the models its requests may use.' : '';
      throw DomainError.invalid(
        `allowed_models lists ${unknown.length === 1 ? 'a model' : 'models'} the catalog does not have: ${shown}${more}. GET /v1/models lists the model ids (suffixes such as :nitro may follow them).${presets}`,
        'allowed_models',
        'unknown_model',
      );
    }
    return ids;
  }

  private catalogIdOf(entry: string): string | null {
    const preset = entry.indexOf(PRESET_MARK);
    const model = preset === -1 ? entry : entry.slice(0, preset);
    if (model === '') return null;
    try {
      return this.catalog.get(parseModelId(model).id)?.id ?? null;
    } catch {
      // An unknown suffix (or :nitro with :floor): no model a request could name.
      return null;
    }
  }
}

/** How a model value names a preset (spec 1): `<model>@preset/<slug>` or `@preset/<slug>`. */
const PRESET_MARK = '@preset/';

function presentKey(k: KeyRecord, usage: KeyUsage, now: Date, rateLimits: RateLimitDefaults): Record<string, unknown> {
  const windowUsage = { daily: usage.dailyNano, weekly: usage.weeklyNano, monthly: usage.monthlyNano, never: usage.lifetimeNano }[k.limit_reset];
  const limitNano = k.limit_nano === null ? null : BigInt(k.limit_nano);
  const remaining = limitNano === null ? null : limitNano > windowUsage ? limitNano - windowUsage : 0n;
  return {
    id: k.keyId,
    name: k.name,
    project: k.project,
    environment: k.environment,
    scope: k.scope,
    hint: k.secretHint,
    organization_id: k.orgId,
    created_by: k.createdBy,
    created_at: k.createdAt,
    updated_at: k.updatedAt,
    expires_at: k.expires_at,
    revoked: k.revokedAt !== null,
    revoked_at: k.revokedAt,
    limit: limitNano === null ? null : nanoToUsd(limitNano),
    limit_reset: k.limit_reset,
    limit_remaining: remaining === null ? null : nanoToUsd(remaining),
    limit_resets_at: limitNano === null ? null : (windowResetsAt(k.limit_reset, now)?.toISOString() ?? null),
    usage: nanoToUsd(usage.lifetimeNano),
    usage_daily: nanoToUsd(usage.dailyNano),
    usage_weekly: nanoToUsd(usage.weeklyNano),
    usage_monthly: nanoToUsd(usage.monthlyNano),
    allowed_models: k.allowed_models,
    allowed_ips: k.allowed_ips,
    allowed_referrers: k.allowed_referrers,
    rpm_limit: k.rpm_limit,
    tpm_limit: k.tpm_limit,
    rate_limit: effectiveRateLimits(k.environment, k.rpm_limit, k.tpm_limit, rateLimits),
  };
}
