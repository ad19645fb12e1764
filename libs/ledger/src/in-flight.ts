import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AccountCommand, GenerationStats } from './account';
import type { CostLine, MeterUsage } from './pricing';
import { SCHEMA_LOCK, type SqlExecutor, type SqlRunner } from '@svc/platform';

type ChargeCommand = Extract<AccountCommand, { type: 'ChargeUsage' }>;

/**
 * What a gateway process has in flight, kept outside the log so that a process killed with
 * `kill -9` loses little (issue 14.10): a lease per serving process, renewed while it lives,
 * and the usage its long streams have delivered so far. The worker's hold reaper charges what a
 * dead process recorded (or releases the hold when it recorded nothing) as soon as its lease
 * lapses, instead of leaving the hold until it expires. Operational state, not a read model: a
 * rebuild never touches it, and the charge it leads to is an ordinary UsageCharged in the log.
 */

/** A gateway's lease lasts this long after its last renewal. */
export const GATEWAY_LEASE_MS = 10_000;
/** How often a gateway renews its lease. */
export const GATEWAY_RENEW_MS = 2_000;
/**
 * How often a running stream records what it has delivered: a gateway killed mid-stream loses
 * at most the output of the last interval (all of it for a stream younger than one interval).
 */
export const PROGRESS_INTERVAL_MS = 2_000;

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS gateway_leases (
    gateway_id text PRIMARY KEY,
    expires_at timestamptz NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS stream_progress (
    hold_id text PRIMARY KEY,
    account_id text NOT NULL,
    amount_nano bigint NOT NULL,
    stats jsonb NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
  )`,
  // Issue 41 A: the whole charge of a settled request whose charge could not land (final), for
  // the reaper to land as it was decided, meters and cost lines included.
  `ALTER TABLE stream_progress ADD COLUMN IF NOT EXISTS charge jsonb`,
  `ALTER TABLE stream_progress ADD COLUMN IF NOT EXISTS final boolean NOT NULL DEFAULT false`,
  // Issue 45: where the other gateways reach this one, when it takes requests forwarded to it.
  `ALTER TABLE gateway_leases ADD COLUMN IF NOT EXISTS peer_url text`,
  // Issue 45: the hash of the secret a gateway proves itself with to the peers it hands ledger commands to.
  `ALTER TABLE gateway_leases ADD COLUMN IF NOT EXISTS peer_token_hash text`,
];

export async function initInFlight(sql: SqlRunner): Promise<void> {
  await sql.transaction(async (tx) => {
    // One process at a time changes the schema (SCHEMA_LOCK): concurrent CREATE ... IF NOT EXISTS can collide.
    await tx.query(SCHEMA_LOCK);
    for (const statement of SCHEMA) await tx.query(statement);
  });
}

/** What a stream has delivered so far, priced as its charge would be. */
export interface StreamProgress {
  holdId: string;
  accountId: string;
  amountNano: bigint;
  stats: GenerationStats;
}

export async function recordProgress(sql: SqlExecutor, progress: StreamProgress): Promise<void> {
  await sql.query(
    `INSERT INTO stream_progress (hold_id, account_id, amount_nano, stats, recorded_at) VALUES ($1, $2, $3, $4, now())
       ON CONFLICT (hold_id) DO UPDATE SET amount_nano = EXCLUDED.amount_nano, stats = EXCLUDED.stats, recorded_at = EXCLUDED.recorded_at`,
    [progress.holdId, progress.accountId, progress.amountNano.toString(), JSON.stringify(progress.stats)],
  );
}

/** What a ChargeUsage command carries beyond its amount and stats, as JSON. */
export interface RecordedCharge {
  usage?: MeterUsage;
  lines?: CostLine[];
  provider_cost_nano?: string | null;
  returned?: number;
}

/**
 * A request's final charge that could not land in the log (issue 41 A): kept so the hold
 * reaper lands it soon, whether or not the process that decided it lives on.
 */
export async function recordUnsettled(sql: SqlExecutor, charge: { holdId: string; accountId: string; command: ChargeCommand }): Promise<void> {
  const { command } = charge;
  const recorded: RecordedCharge = {
    ...(command.usage === undefined ? {} : { usage: command.usage }),
    ...(command.lines === undefined ? {} : { lines: command.lines }),
    ...(command.providerCostNano == null ? {} : { provider_cost_nano: command.providerCostNano.toString() }),
    ...(command.returned === undefined ? {} : { returned: command.returned }),
  };
  await sql.query(
    `INSERT INTO stream_progress (hold_id, account_id, amount_nano, stats, charge, final, recorded_at) VALUES ($1, $2, $3, $4, $5, true, now())
       ON CONFLICT (hold_id) DO UPDATE SET amount_nano = EXCLUDED.amount_nano, stats = EXCLUDED.stats, charge = EXCLUDED.charge, final = true, recorded_at = EXCLUDED.recorded_at`,
    [charge.holdId, charge.accountId, command.amountNano.toString(), JSON.stringify(command.stats), JSON.stringify(recorded)],
  );
}

export async function forgetProgress(sql: SqlExecutor, holdId: string): Promise<void> {
  await sql.query('DELETE FROM stream_progress WHERE hold_id = $1', [holdId]);
}

/** An open hold whose gateway's lease has lapsed, or whose final charge is waiting, with what was recorded of it. */
export interface OrphanedHold {
  holdId: string;
  accountId: string;
  progress: { amountNano: bigint; stats: GenerationStats; charge?: RecordedCharge } | null;
}

/** A final charge waits this long for its own process to land it before the reaper does. */
const UNSETTLED_GRACE = `interval '5 seconds'`;

/**
 * Open holds (as the credits read model has them) placed by a gateway whose lease has lapsed.
 * Holds of processes that had no lease (placed before this existed, or by the CLI) are left to
 * expire as before.
 */
export async function orphanedHolds(sql: SqlExecutor, limit = 500): Promise<OrphanedHold[]> {
  const { rows } = await sql.query<{
    hold_id: string;
    account_id: string;
    amount_nano: string | null;
    stats: GenerationStats | string | null;
    charge: RecordedCharge | string | null;
  }>(
    `SELECT h.hold_id, h.account_id, p.amount_nano, p.stats, p.charge
       FROM credit_holds h LEFT JOIN stream_progress p ON p.hold_id = h.hold_id
      WHERE (h.gateway_id IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM gateway_leases g WHERE g.gateway_id = h.gateway_id AND g.expires_at > now()))
         OR (p.final AND p.recorded_at < now() - ${UNSETTLED_GRACE})
         -- Due to expire: what was delivered is charged rather than released unbilled.
         OR (p.hold_id IS NOT NULL AND h.expires_at <= now())
      ORDER BY h.hold_id LIMIT $1`,
    [limit],
  );
  const json = <T>(v: T | string | null): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : v);
  return rows.map((r) => ({
    holdId: r.hold_id,
    accountId: r.account_id,
    progress:
      r.amount_nano === null
        ? null
        : { amountNano: BigInt(r.amount_nano), stats: json(r.stats)!, ...(r.charge === null ? {} : { charge: json<RecordedCharge>(r.charge)! }) },
  }));
}

/** Progress rows whose hold is no longer open (settled by its gateway or by the reaper), and old leases. */
export async function pruneInFlight(sql: SqlExecutor): Promise<void> {
  await sql.query(
    `DELETE FROM stream_progress p WHERE recorded_at < now() - interval '1 minute'
        AND NOT EXISTS (SELECT 1 FROM credit_holds h WHERE h.hold_id = p.hold_id)`,
  );
  await sql.query(
    `DELETE FROM gateway_leases g WHERE expires_at < now() - interval '1 hour'
        AND NOT EXISTS (SELECT 1 FROM credit_holds h WHERE h.gateway_id = g.gateway_id)`,
  );
}

/** A live gateway that takes forwarded requests, and where. */
export interface PeerGateway {
  id: string;
  url: string;
  /** SHA-256 (hex) of the secret it proves itself with (peerTokenIs). */
  tokenHash: string;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest();

/** Whether `token` is the secret of `peer`, whose lease holds only its hash. */
export function peerTokenIs(peer: PeerGateway, token: string): boolean {
  const expected = Buffer.from(peer.tokenHash, 'hex');
  const given = sha256(token);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/**
 * A serving process's lease. Taken before the process places any hold (its id goes into every
 * HoldPlaced's metadata), renewed every GATEWAY_RENEW_MS, given back on a clean stop. A renewal
 * that fails is retried at the next tick: the lease lapses only if renewals fail for longer
 * than GATEWAY_LEASE_MS, and then the process's holds may be reaped under it, which settles
 * each at most once either way (the account decides).
 */
export class GatewayLease {
  readonly id = `gw-${randomBytes(8).toString('hex')}`;
  /**
   * What this gateway shows the peers it hands ledger commands to: anyone who can read the
   * leases could write the ledger directly, but only its hash is kept there.
   */
  readonly peerToken = randomBytes(32).toString('base64url');
  private readonly peerTokenHash = sha256(this.peerToken).toString('hex');
  private ticker?: NodeJS.Timeout;
  private renewing: Promise<void> = Promise.resolve();
  private peerUrl: string | null = null;
  private livePeers: readonly PeerGateway[] = [];

  constructor(private readonly sql: SqlExecutor) {}

  async start(): Promise<void> {
    await this.renew();
    this.ticker = setInterval(() => {
      this.renewing = this.renew().catch((err: unknown) =>
        console.warn(`gateway lease ${this.id} not renewed: ${err instanceof Error ? err.message : String(err)}`),
      );
    }, GATEWAY_RENEW_MS);
    this.ticker.unref();
  }

  /**
   * Issue 45: from now on this gateway takes requests other gateways forward to it at `url`, and
   * learns at every renewal which other gateways do (peers).
   */
  async advertise(url: string): Promise<void> {
    this.peerUrl = url;
    await this.renew();
  }

  /** The live gateways that take forwarded requests, this one among them once it advertises; as of the last renewal. */
  get peers(): readonly PeerGateway[] {
    return this.livePeers;
  }

  private async renew(): Promise<void> {
    await this.sql.query(
      `INSERT INTO gateway_leases (gateway_id, expires_at, peer_url, peer_token_hash) VALUES ($1, now() + make_interval(secs => $2), $3, $4)
         ON CONFLICT (gateway_id) DO UPDATE SET expires_at = EXCLUDED.expires_at, peer_url = EXCLUDED.peer_url, peer_token_hash = EXCLUDED.peer_token_hash`,
      [this.id, GATEWAY_LEASE_MS / 1000, this.peerUrl, this.peerUrl === null ? null : this.peerTokenHash],
    );
    if (this.peerUrl === null) return;
    const { rows } = await this.sql.query<{ gateway_id: string; peer_url: string; peer_token_hash: string }>(
      `SELECT gateway_id, peer_url, peer_token_hash FROM gateway_leases
        WHERE expires_at > now() AND peer_url IS NOT NULL AND peer_token_hash IS NOT NULL ORDER BY gateway_id`,
    );
    this.livePeers = rows.map((r) => ({ id: r.gateway_id, url: r.peer_url, tokenHash: r.peer_token_hash }));
  }

  /** Gives the lease back: whatever holds the process still has open are reaped at once. */
  async stop(): Promise<void> {
    clearInterval(this.ticker);
    await this.renewing;
    await this.sql.query('DELETE FROM gateway_leases WHERE gateway_id = $1', [this.id]);
  }
}
