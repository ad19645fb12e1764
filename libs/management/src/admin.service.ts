import { Inject, Injectable } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { randomBytes } from 'node:crypto';
import type { Catalog, CatalogProvider } from '@svc/catalog';
import { DomainError, EVENT_STORE, type EventMetadata, type EventStore, type Position } from '@svc/eventstore';
import {
  OrganizationCommand,
  providerKeyContext,
  providerKeyHint,
  type SettingsCommand,
  SettingsCommandMessage,
  type AuditEntry,
  getOrg,
  listAuditLog,
  listProviderKeys,
  orgRoleOf,
  type ProviderKeyRow,
} from '@svc/identity';
import { ApiError, CONFIG, nanoToUsd, READ_DB, sealSecret, usdToNano } from '@svc/platform';
import type { OrgCommand } from '@svc/identity';
import type { AccountCommand } from '@svc/ledger';
import { type AdjustmentKind, findAdjustment, LedgerCommand, type CreditsRow, getCredits } from '@svc/ledger';
import { PROJECTIONS, ReadYourWrites } from '@svc/projections';
import { CATALOG } from '@svc/catalog';
import type { Config, SqlRunner } from '@svc/platform';
import type { ProjectionRunner } from '@svc/projections';
import { byokUnavailable } from '@svc/metering';
import type { KeyOwner } from './keys.service';

export const newAccountId = () => `acc_${randomBytes(8).toString('hex')}`;

/** An operator's correction (issue 23), as POST /admin/accounts/{id}/adjustments takes it. */
export interface AdjustmentInput {
  amountUsd: number;
  kind: AdjustmentKind;
  reason: string;
  operator: string;
  adjustmentId?: string;
}

/** A recorded correction, as the operator API answers it. */
export interface RecordedAdjustment {
  adjustment_id: string;
  account_id: string;
  kind: AdjustmentKind;
  amount_usd: number;
  reason: string;
  operator: string;
  created_at: string;
}

/** Accounts, credits and organizations for the operator and the companion app. */
@Injectable()
export class AdminService {
  constructor(
    @Inject(READ_DB) private readonly sql: SqlRunner,
    @Inject(CONFIG) private readonly config: Pick<Config, 'encryptionKey'>,
    @Inject(CATALOG) private readonly catalog: Pick<Catalog, 'models'>,
    @Inject(PROJECTIONS) private readonly projections: Pick<ProjectionRunner, 'waitUntilVisible'>,
    private readonly commands: CommandBus,
    private readonly reads: ReadYourWrites,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  async createAccount(initialCreditsUsd: number | undefined, metadata: EventMetadata, reason = 'admin'): Promise<string> {
    const accountId = newAccountId();
    let last = (await this.commands.execute(new LedgerCommand(accountId, { type: 'OpenAccount', accountId }, metadata))).appended!.position;
    if (initialCreditsUsd) last = await this.addCredits(accountId, initialCreditsUsd, metadata, reason);
    await this.settle(last, 'credits');
    return accountId;
  }

  /** `reason` is what the statement shows for the credit: the operator API's, or the CLI's. */
  async addCredits(accountId: string, amountUsd: number, metadata: EventMetadata, reason = 'admin'): Promise<Position> {
    let amountNano: bigint;
    try {
      amountNano = usdToNano(amountUsd);
    } catch {
      throw DomainError.invalid('amount_usd must be a positive USD amount with at most 9 decimals.', 'amount_usd');
    }
    return (await this.ledger(accountId, { type: 'AddCredits', amountNano, reason }, metadata))!;
  }

  /** A command for an existing account; returns the position once the credits read model has it. */
  private async ledger(accountId: string, command: AccountCommand, metadata: EventMetadata): Promise<Position | null> {
    const result = await this.commands.execute(new LedgerCommand(accountId, command, metadata)).catch((err: unknown) => {
      throw err instanceof DomainError && err.code === 'account_not_found' ? accountNotFound(accountId) : err;
    });
    if (!result.appended) return null;
    await this.settle(result.appended.position, 'credits');
    return result.appended.position;
  }

  async setDailyLimit(accountId: string, limitUsd: number | null, metadata: EventMetadata): Promise<void> {
    let limitNano: bigint | null;
    try {
      limitNano = limitUsd === null ? null : usdToNano(limitUsd);
    } catch {
      throw DomainError.invalid('daily_limit_usd must be a USD amount with at most 9 decimals, or null.', 'daily_limit_usd');
    }
    await this.ledger(accountId, { type: 'SetDailyLimit', limitNano }, metadata);
  }

  /**
   * Issue 23, corrections: records an operator's credit note or adjustment as an event (never an
   * edit). With `adjustmentId`, a retry with the same content answers the recorded one again and
   * records nothing; other content under that id is a 409.
   */
  async adjustBalance(accountId: string, input: AdjustmentInput, metadata: EventMetadata): Promise<RecordedAdjustment> {
    let amountNano: bigint;
    try {
      amountNano = usdToNano(input.amountUsd, { allowNegative: true });
    } catch {
      throw DomainError.invalid('amount_usd must be a USD amount with at most 9 decimals.', 'amount_usd');
    }
    const adjustmentId = input.adjustmentId ?? `adj_${randomBytes(12).toString('hex')}`;
    const command: AccountCommand = { type: 'AdjustBalance', adjustmentId, amountNano, kind: input.kind, reason: input.reason, operator: input.operator };
    const result = await this.commands.execute(new LedgerCommand(accountId, command, metadata)).catch((err: unknown) => {
      if (!(err instanceof DomainError)) throw err;
      if (err.code === 'account_not_found') throw accountNotFound(accountId);
      const param = typeof err.details.param === 'string' ? err.details.param : null;
      // Spec 7 has no row for these: a 409 says the request is fine but the account's state refuses it.
      if (err.code === 'adjustment_exceeds_balance' || err.code === 'adjustment_id_conflict') throw DomainError.conflict(err.message, err.code, param);
      // Left an ApiError: as a domain error its ledger code would be mapped as the ledger's refusal of a request.
      throw ApiError.invalidRequest(err.message, param, err.code);
    });
    if (result.appended) await this.settle(result.appended.position, 'credits', 'audit_log');
    const recorded = await findAdjustment(this.store, accountId, adjustmentId);
    // The decider just accepted it, or recognised it as already recorded: it is in the stream.
    if (!recorded) throw new Error(`adjustment ${adjustmentId} of ${accountId} is not in its stream`);
    const d = recorded.data;
    return {
      adjustment_id: d.adjustment_id,
      account_id: d.account_id,
      kind: d.kind,
      amount_usd: nanoToUsd(BigInt(d.amount_nano)),
      reason: d.reason,
      operator: d.operator,
      created_at: String(recorded.metadata.at),
    };
  }

  /** `param` names the request field that carried the id, for the 404. */
  async credits(accountId: string, param: string | null = null): Promise<CreditsRow> {
    // Includes what this process just billed to the account.
    await this.reads.settle(accountId, 'credits');
    const row = await getCredits(this.sql, accountId);
    if (!row) throw accountNotFound(accountId, param);
    return row;
  }

  /** A key of the account itself, or (with orgId) of an organization it owns or belongs to. */
  async keyOwner(accountId: string, orgId: string | undefined): Promise<KeyOwner> {
    await this.credits(accountId);
    if (orgId === undefined) return { accountId, workspaceId: accountId, orgId: null, createdBy: accountId };
    const org = await this.activeOrg(orgId);
    if ((await orgRoleOf(this.sql, orgId, accountId)) === null) {
      throw DomainError.invalid(`Account ${accountId} is not part of organization ${orgId}.`, 'org_id', 'not_a_member');
    }
    // Spec 1: keys created inside an organization bill the owner's balance.
    return { accountId: org.ownerAccountId, workspaceId: orgId, orgId, createdBy: accountId };
  }

  async createOrg(ownerAccountId: string, name: string | undefined, metadata: EventMetadata): Promise<string> {
    await this.credits(ownerAccountId, 'owner_account_id');
    const orgId = `org_${randomBytes(8).toString('hex')}`;
    await this.org(orgId, { type: 'CreateOrg', orgId, ownerAccountId, name: name ?? orgId }, metadata);
    return orgId;
  }

  async changeOrg(orgId: string, command: Exclude<OrgCommand, { type: 'CreateOrg' }>, metadata: EventMetadata): Promise<void> {
    await this.activeOrg(orgId);
    if (command.type === 'AddMember') await this.credits(command.accountId, 'account_id');
    await this.org(orgId, command, metadata);
  }

  /** BYOK: seals the key (it is recorded and stored only sealed) and returns its hint. */
  async saveProviderKey(
    accountId: string,
    provider: string,
    apiKey: string,
    metadata: EventMetadata,
    /** Runs once the key could be saved, before anything is written (email step-up). */
    authorize: () => Promise<void> = async () => undefined,
  ): Promise<{ provider: string; hint: string }> {
    const encryptionKey = this.config.encryptionKey;
    if (encryptionKey === null) throw byokUnavailable();
    this.catalogProvider(provider);
    await this.credits(accountId);
    await authorize();
    const hint = providerKeyHint(apiKey);
    const encryptedKey = sealSecret(encryptionKey, apiKey, providerKeyContext(accountId, provider));
    await this.settings(accountId, { type: 'SaveProviderKey', accountId, provider, encryptedKey, hint }, metadata);
    return { provider, hint };
  }

  /** Deleting needs no encryption key: an operator can always take a key out of use. */
  async deleteProviderKey(accountId: string, provider: string, metadata: EventMetadata): Promise<void> {
    this.catalogProvider(provider);
    await this.credits(accountId);
    await this.settings(accountId, { type: 'DeleteProviderKey', accountId, provider }, metadata);
  }

  async providerKeys(accountId: string): Promise<ProviderKeyRow[]> {
    await this.credits(accountId);
    return listProviderKeys(this.sql, accountId);
  }

  /** The providers a key can be saved for: those the catalog routes to, by name. */
  providerNames(): string[] {
    return [...this.catalogProviders().keys()].sort();
  }

  private catalogProviders(): Map<string, CatalogProvider> {
    return new Map(this.catalog.models.flatMap((m) => m.providers.map((r) => [r.provider.name, r.provider] as const)));
  }

  /** Issue 5: a key is saved for a provider the catalog routes to, nothing else. */
  private catalogProvider(provider: string): CatalogProvider {
    const known = this.catalogProviders();
    const found = known.get(provider);
    if (!found)
      throw DomainError.notFound(`No provider '${provider}' in the catalog; known: ${[...known.keys()].sort().join(', ')}.`, 'provider_not_found', 'provider');
    return found;
  }

  private async settings(accountId: string, command: SettingsCommand, metadata: EventMetadata): Promise<void> {
    const result = await this.commands.execute(new SettingsCommandMessage(accountId, command, metadata)).catch((err: unknown) => {
      if (err instanceof DomainError && err.code === 'provider_key_not_found') throw DomainError.notFound(err.message, err.code, 'provider');
      throw err;
    });
    if (result.appended) await this.settle(result.appended.position, 'provider_keys', 'audit_log');
  }

  auditLog(accountId: string | null, limit: number): Promise<AuditEntry[]> {
    return listAuditLog(this.sql, accountId, limit);
  }

  private async activeOrg(orgId: string) {
    const org = await getOrg(this.sql, orgId);
    if (!org || org.deleted) throw DomainError.notFound(`No organization with id '${orgId}'.`, 'org_not_found');
    return org;
  }

  private async org(orgId: string, command: OrgCommand, metadata: EventMetadata): Promise<void> {
    const result = await this.commands.execute(new OrganizationCommand(orgId, command, metadata)).catch((err: unknown) => {
      if (err instanceof DomainError) {
        const kind = err.code === 'member_not_found' ? 'not_found' : err.code === 'invalid_org_name' ? 'invalid' : 'conflict';
        const param = typeof err.details.param === 'string' ? err.details.param : err.code?.startsWith('member_') ? 'account_id' : null;
        throw new DomainError(err.code, err.message, { param }, kind);
      }
      throw err;
    });
    if (result.appended) await this.settle(result.appended.position, 'identity', 'audit_log');
  }

  /**
   * Until the change is in `projections` and, for what authentication caches, out of every
   * cache. The audit log among them when the change is audited: the account may read it next.
   */
  private settle(position: Position, ...projections: string[]): Promise<void> {
    return this.projections.waitUntilVisible(position, projections);
  }
}

function accountNotFound(accountId: string, param: string | null = null): DomainError {
  return DomainError.notFound(`No account with id '${accountId}'.`, 'account_not_found', param);
}
