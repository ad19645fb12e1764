import { StreamContentionError, type AppendResult, type AggregateStore, type EventMetadata } from '@svc/eventstore';
import { DomainError, isConnectionFailure } from '@svc/platform';
import type { AccountCommand, AccountEvent } from './account';
import { decodeValue, encodeValue } from './account/snapshot';
import { decideOnAccount } from './ledger.module';

/**
 * Issue 45: the commands of an account that gateways would otherwise race on, handed to the
 * one gateway that decides them (its owner, PeerRouting), in batches over a kept connection.
 * The gateway that received the request still serves it whole (admission, upstream call, the
 * answer); only its holds and charges travel. The owner decides each as it decides its own,
 * on the stream's state it keeps, and appends them together: one writer per account, and no
 * extra HTTP exchange per request.
 */
export const PEER_LEDGER_PATH = '/internal/peer/ledger';
/** The header naming the gateway that sends a batch; its lease's token goes as a bearer token. */
export const PEER_ID_HEADER = 'x-svc-peer-id';
/** When the batch left (ms since the epoch, the sender's clock). */
export const PEER_SENT_AT_HEADER = 'x-svc-peer-sent-at';
/**
 * A sender gives up on a batch after this long, and its commands' fate is then unknown to it.
 * The owner turns away, undecided, a batch that reaches it later than PEER_BATCH_STALE_MS (a
 * process paused and resumed, say): its holds would otherwise be placed for requests that have
 * failed already, and stay open until they expire.
 */
export const PEER_BATCH_TIMEOUT_MS = 30_000;
export const PEER_BATCH_STALE_MS = 20_000;

/**
 * A batch lost once sent to the owner (it died, or stopped answering): what it decided is
 * unknown. It counts as a lost connection (`code`), which the billed-call pipeline retries or
 * settles later as it does a lost store connection; a request that fails on it is a 502, as
 * for a gateway lost mid-request.
 */
export class PeerUnavailableError extends Error {
  override readonly name = 'PeerUnavailableError';
  readonly code = 'ECONNRESET';
}

export interface ForwardedCommand {
  accountId: string;
  command: AccountCommand;
  metadata: EventMetadata;
}

/** What a command decided elsewhere gives back: its events and the append that carried them (the state stays with its owner). */
export interface LedgerAnswer {
  events: AccountEvent[];
  appended: AppendResult | null;
}

/** Decides an account command on another gateway, or says it is decided here. */
export interface LedgerForwarder {
  /** The owner's answer when another gateway owns `accountId` now; null: decide it here. */
  forward(accountId: string, command: AccountCommand, metadata: EventMetadata): Promise<LedgerAnswer> | null;
}

/** The owner's refusal or failure, as it travels: the sender throws what the owner threw, as far as it can be told apart. */
type WireError =
  | { domain: { code: string | null; message: string; details: unknown; kind: DomainError['kind'] } }
  | { contention: { stream: string; attempts: number } }
  | { unavailable: string }
  | { failed: string };

type WireOutcome = { events: unknown; appended: { nextRevision: string; position: string } | null } | { error: WireError };

export interface WireBatch {
  commands: { accountId: string; command: unknown; metadata: EventMetadata }[];
}

export interface WireAnswer {
  outcomes: WireOutcome[];
  /** The accounts of the batch whose commands also reach the owner from elsewhere (PeerRouting.sharedBeyond). */
  shared: string[];
}

export function encodeBatch(commands: readonly ForwardedCommand[]): string {
  return JSON.stringify({ commands: commands.map((c) => ({ accountId: c.accountId, command: encodeValue(c.command), metadata: c.metadata })) });
}

/** A batch as the owner received it; null when it is not one (the route answers 400). */
export function decodeBatch(body: unknown): ForwardedCommand[] | null {
  const commands = (body as Partial<WireBatch> | null)?.commands;
  if (!Array.isArray(commands)) return null;
  const decoded: ForwardedCommand[] = [];
  for (const c of commands) {
    const type = (c?.command as { type?: unknown } | null)?.type;
    if (typeof c?.accountId !== 'string' || typeof type !== 'string' || (c.metadata !== undefined && typeof c.metadata !== 'object')) return null;
    decoded.push({ accountId: c.accountId, command: decodeValue(c.command) as AccountCommand, metadata: c.metadata ?? {} });
  }
  return decoded;
}

/**
 * The owner's side: every command of the batch decided on its account, as a command of a
 * request received here would be; they queue on their streams with this gateway's own and are
 * appended with them.
 */
export async function decideForwarded(
  aggregates: AggregateStore,
  commands: readonly ForwardedCommand[],
  warn: (message: string) => void,
): Promise<WireOutcome[]> {
  const settled = await Promise.allSettled(commands.map((c) => decideOnAccount(aggregates, c.accountId, c.command, c.metadata, warn)));
  return settled.map((s): WireOutcome => {
    if (s.status === 'fulfilled') {
      const { events, appended } = s.value;
      return {
        events: encodeValue(events),
        appended: appended === null ? null : { nextRevision: appended.nextRevision.toString(), position: appended.position },
      };
    }
    return { error: wireError(s.reason) };
  });
}

function wireError(err: unknown): WireError {
  if (err instanceof DomainError) return { domain: { code: err.code, message: err.message, details: encodeValue(err.details), kind: err.kind } };
  if (err instanceof StreamContentionError) return { contention: { stream: err.stream, attempts: err.attempts } };
  const message = err instanceof Error ? err.message : String(err);
  return isConnectionFailure(err) ? { unavailable: message } : { failed: message };
}

/** The sender's side: one command's outcome, as its own AggregateStore would have resolved or thrown it. */
export function answerOf(outcome: WireOutcome): LedgerAnswer {
  if ('error' in outcome) throw errorOf(outcome.error);
  const { appended } = outcome;
  return {
    events: decodeValue(outcome.events) as AccountEvent[],
    appended: appended === null ? null : { nextRevision: BigInt(appended.nextRevision), position: appended.position },
  };
}

function errorOf(error: WireError): Error {
  if ('domain' in error) {
    const { code, message, details, kind } = error.domain;
    return new DomainError(code, message, decodeValue(details) as Record<string, unknown>, kind);
  }
  if ('contention' in error) return new StreamContentionError(error.contention.stream, error.contention.attempts);
  // The owner could not reach the store: the command's fate is unknown there as it would be here.
  if ('unavailable' in error) return Object.assign(new Error(`the gateway deciding this account lost the store: ${error.unavailable}`), { code: '08006' });
  return new Error(`the gateway deciding this account failed: ${error.failed}`);
}
