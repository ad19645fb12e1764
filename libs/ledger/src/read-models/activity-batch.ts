import { type MeterUsage, UNIT_METERS } from '../pricing';
import { eventTime, utcDay } from '@svc/projections';
import type { AccountRecorded, RecordedOf } from './account-recorded';

/** What a resolved request adds to its day's row. */
interface Contribution {
  accountId: string;
  keyId: string;
  /** ISO date-time; its UTC day is the row's. */
  at: string;
  model: string;
  endpoint: string;
  user: string | null;
  billed: boolean;
  /** What it adds to the billed and not-billed request counts, when not one request of its kind (a correction). */
  requests?: [billed: number, notBilled: number];
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
  costNano: string;
  /** The meters other than tokens (characters, images...), 0 where unused. */
  units: MeterUsage;
}

/** The attribution a request's HoldPlaced gave it, taken (and forgotten) when the hold resolves. */
export interface OpenHold {
  account_id: string;
  hold_id: string;
  model: string;
  endpoint: string;
  user_id: string | null;
  /** A hold the hold reaper released: when (ISO), so its gateway's correction moves it to billed on that day (issue 41 D). */
  released_at?: string | null;
}

/** One activity_daily row's key and the sums a batch adds to it. */
export type DailySums = [accountId: string, keyId: string, day: string, model: string, endpoint: string, user: string | null, ...sums: bigint[]];

const holdKey = (accountId: string, holdId: string) => `${accountId}\u0000${holdId}`;
const holdOf = (e: AccountRecorded) => holdKey(e.data.account_id, (e.data as { hold_id: string }).hold_id);
const endUser = (user: unknown) => (typeof user === 'string' && user !== '' ? user : null);

/** The holds of earlier batches that this one resolves, as (account, hold). */
export function earlierHolds(events: readonly AccountRecorded[]): [string, string][] {
  const openHere = new Set<string>();
  const earlier: [string, string][] = [];
  for (const e of events) {
    if (e.type === 'HoldPlaced') openHere.add(holdOf(e));
    else if (
      (e.type === 'UsageCharged' || e.type === 'UsageCorrected' || e.type === 'HoldReleased' || e.type === 'HoldExpired') &&
      !openHere.delete(holdOf(e))
    ) {
      earlier.push([e.data.account_id, e.data.hold_id]);
    }
  }
  return earlier;
}

/**
 * A batch of the activity projection folded in memory: the sums per activity_daily row, and the
 * open holds (those of earlier batches it resolves, taken from the table first; those it places).
 */
export class ActivityBatch {
  readonly open = new Map<string, OpenHold>();
  readonly daily = new Map<string, DailySums>();

  constructor(earlier: readonly OpenHold[]) {
    for (const r of earlier) this.open.set(holdKey(r.account_id, r.hold_id), r);
  }

  fold(e: AccountRecorded): void {
    switch (e.type) {
      case 'HoldPlaced':
        return this.holdPlaced(e);
      case 'UsageCharged':
        return this.charged(e);
      case 'UsageCorrected':
        return this.corrected(e);
      case 'HoldReleased':
        return this.released(e);
      case 'HoldExpired':
        return this.expired(e);
      case 'FreeGenerationRecorded':
        return this.free(e);
    }
  }

  private holdPlaced(e: RecordedOf<'HoldPlaced'>): void {
    const d = e.data;
    this.open.set(holdOf(e), { account_id: d.account_id, hold_id: d.hold_id, model: d.model, endpoint: d.endpoint, user_id: endUser(e.metadata.user) });
  }

  private charged(e: RecordedOf<'UsageCharged'>): void {
    const d = e.data;
    const hold = this.take(e);
    this.add({
      accountId: d.account_id,
      keyId: d.key_id,
      at: d.charged_at ?? eventTime(e),
      // The model and endpoint that answered, which the charge names.
      model: d.model,
      endpoint: d.endpoint,
      user: hold?.user_id ?? null,
      billed: true,
      promptTokens: d.prompt_tokens,
      completionTokens: d.completion_tokens,
      cachedTokens: d.cached_tokens,
      reasoningTokens: d.reasoning_tokens,
      costNano: d.amount_nano,
      units: d.usage ?? {},
    });
  }

  /**
   * Issue 41 D: what a gateway charged beyond the reaper's charge, counted with the request the
   * reaper settled, not as one more. One the reaper released (kept aside for this, below)
   * moves from not billed to billed in its row; the end user is in the metadata otherwise.
   */
  private corrected(e: RecordedOf<'UsageCorrected'>): void {
    const d = e.data;
    const released = this.take(e);
    const added = d.usage_added;
    this.add({
      accountId: d.account_id,
      keyId: d.key_id,
      at: released ? (released.released_at ?? d.charged_at) : d.charged_at,
      model: released?.model ?? d.model,
      endpoint: released?.endpoint ?? d.endpoint,
      user: released ? released.user_id : endUser(e.metadata.user),
      billed: true,
      requests: released ? [1, -1] : [0, 0],
      promptTokens: added.input ?? 0,
      completionTokens: added.output ?? 0,
      cachedTokens: added.cached_input ?? 0,
      reasoningTokens: 0,
      costNano: d.amount_nano,
      units: added,
    });
  }

  private released(e: RecordedOf<'HoldReleased'>): void {
    const d = e.data;
    const hold = this.take(e);
    const model = d.model ?? hold?.model;
    const endpoint = d.endpoint ?? hold?.endpoint;
    // Only a log whose HoldPlaced is missing lacks both; such a request has nowhere to count.
    if (model === undefined || endpoint === undefined) return;
    this.add(notBilled(d.account_id, d.key_id, eventTime(e), model, endpoint, hold?.user_id ?? null));
    // Issue 41 D: its gateway may yet charge it (UsageCorrected): where it was counted is kept for that.
    if (d.reaped && hold) this.open.set(holdOf(e), { ...hold, model, endpoint, released_at: eventTime(e) });
  }

  private expired(e: RecordedOf<'HoldExpired'>): void {
    const d = e.data;
    const hold = this.take(e);
    if (hold) this.add(notBilled(d.account_id, d.key_id, eventTime(e), hold.model, hold.endpoint, hold.user_id));
  }

  /**
   * Issue 41 item 17: a free call (spec 4.13, moderation) is a request answered, at cost 0,
   * so it counts in `requests` like a billed one. A response cache hit names no model (only
   * the generation it replays) and stays out: its request was counted when first answered.
   */
  private free(e: RecordedOf<'FreeGenerationRecorded'>): void {
    const d = e.data;
    if (d.model === undefined || d.source_id !== undefined) return;
    this.add({
      accountId: d.account_id,
      keyId: d.key_id,
      at: eventTime(e),
      model: d.model,
      endpoint: d.endpoint,
      user: endUser(e.metadata.user),
      billed: true,
      promptTokens: 0,
      completionTokens: 0,
      cachedTokens: 0,
      reasoningTokens: 0,
      costNano: '0',
      units: {},
    });
  }

  private take(e: AccountRecorded): OpenHold | null {
    const key = holdOf(e);
    const hold = this.open.get(key) ?? null;
    this.open.delete(key);
    return hold;
  }

  private add(c: Contribution): void {
    const day = utcDay(c.at);
    const slot = JSON.stringify([c.accountId, c.keyId, day, c.model, c.endpoint, c.user]);
    const [billed, notBilled] = c.requests ?? (c.billed ? [1, 0] : [0, 1]);
    const sums = [
      billed,
      notBilled,
      c.promptTokens,
      c.completionTokens,
      c.cachedTokens,
      c.reasoningTokens,
      c.costNano,
      ...UNIT_METERS.map((m) => c.units[m] ?? 0),
    ];
    const row = this.daily.get(slot) ?? [c.accountId, c.keyId, day, c.model, c.endpoint, c.user, ...sums.map(() => 0n)];
    sums.forEach((value, i) => (row[6 + i] = (row[6 + i] as bigint) + BigInt(value)));
    this.daily.set(slot, row);
  }
}

function notBilled(accountId: string, keyId: string, at: string, model: string, endpoint: string, user: string | null): Contribution {
  return {
    accountId,
    keyId,
    at,
    model,
    endpoint,
    user,
    billed: false,
    promptTokens: 0,
    completionTokens: 0,
    cachedTokens: 0,
    reasoningTokens: 0,
    costNano: '0',
    units: {},
  };
}
