/**
 * What the billed-call pipeline needs of the process it runs in: the catalog and provider
 * clients, the account's decisions, the caller's token window, and where it reports and keeps
 * what it could not land.
 */
import type { Catalog } from '@svc/catalog';
import type { EventMetadata } from '@svc/eventstore';
import type { Caller } from '@svc/identity';
import type { AccountCommand, LedgerAnswer } from '@svc/ledger';
import type { Clock } from '@svc/platform';
import type { Provider } from '@svc/providers';
import type { Tracing } from '@svc/telemetry';
import type { OwnProviders } from './targets';

/** The spec 8 tokens-per-minute window of a caller, as the edge keeps it. */
export interface TokenLimits {
  /** Counts the prompt before anything is held; resolves with the window's response headers. */
  consumePrompt(caller: Caller, tokens: number): Promise<Record<string, string>>;
  recordOutput(caller: Caller, tokens: number): Promise<void>;
}

export interface MeteringDeps {
  clock: Clock;
  catalog: Catalog;
  /** The operator's provider clients, by catalog provider name. */
  providers: ReadonlyMap<string, Provider>;
  /** The accounts' own provider clients (BYOK): OwnProviders, which opens their sealed keys. */
  own: Pick<OwnProviders, 'resolver'>;
  byokFeePercent: number;
  upstreamTimeoutMs: number;
  /** Decides `command` on the account's stream (the command bus, in a gateway; or the account's owner, issue 45). */
  ledger(accountId: string, command: AccountCommand, metadata: EventMetadata): Promise<LedgerAnswer>;
  tokenLimits: TokenLimits;
  /** The lease of the serving process, named in HoldPlaced's metadata so the hold reaper knows whom it waits for. */
  leaseId(): string | undefined;
  warn(message: string): void;
  /** Told of every upstream call and every charge (the process's metrics); O(1), no I/O. */
  observer?: MeteringObserver;
  /** Issue 22: spans of the hold, each upstream call and the charge or release; absent when the process does not trace. */
  tracing?: Tracing | null;
  /**
   * Where a charge for delivered output that could not land in time is kept for the hold reaper
   * to land (issue 41 A): durable, outside the account's stream. Absent: such a charge fails.
   */
  unsettled?: UnsettledCharges;
}

/** What settling a hold asks the account to decide. */
export type ChargeCommand = Extract<AccountCommand, { type: 'ChargeUsage' }>;

/** A charge decided but not yet in the log: the command the account is to decide, as data. */
export interface UnsettledCharge {
  holdId: string;
  accountId: string;
  command: ChargeCommand;
}

export interface UnsettledCharges {
  record(charge: UnsettledCharge): Promise<void>;
}

/**
 * What the pipeline reports as it runs (issue 22): each upstream call, answered or failed, with
 * its time, and each charge this process records, by generation id (the request log finds its
 * generation's by the id it answered with). Implemented by the process's metrics.
 */
export interface MeteringObserver {
  upstreamAnswered(generationId: string, provider: string, operation: string, seconds: number): void;
  upstreamFailed(generationId: string, provider: string, operation: string, seconds: number, error: unknown): void;
  charged(generationId: string, amountNano: bigint): void;
}
