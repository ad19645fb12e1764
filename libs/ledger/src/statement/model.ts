import type { Position } from '@svc/eventstore';
import type { Nano } from '@svc/platform';
import type { AdjustmentKind } from '../account';
import type { MeterUsage } from '../pricing';

export interface StatementPeriod {
  from: Date;
  to: Date;
}

export interface ChargeLine {
  /** UTC day of the charges. */
  date: string;
  model: string;
  keyId: string;
  requests: number;
  amountNano: Nano;
  meters: MeterUsage;
}

export interface Statement {
  accountId: string;
  from: Date;
  to: Date;
  /** The position of the last event of the stream the statement includes; null when none is. */
  builtAtPosition: Position | null;
  openingNano: Nano;
  closingNano: Nano;
  credits: { at: string; amountNano: Nano; reason: string }[];
  charges: ChargeLine[];
  releases: { at: string; holdId: string; keyId: string; heldNano: Nano; reason: string }[];
  expiries: { at: string; holdId: string; keyId: string; heldNano: Nano }[];
  /** Null in a statement seen from an organization's workspace (statementSeenFrom). */
  adjustments: { at: string; adjustmentId: string; kind: AdjustmentKind; amountNano: Nano; reason: string | null; operator: string | null }[];
  totals: { creditsNano: Nano; chargesNano: Nano; adjustmentsNano: Nano; byMeter: MeterUsage };
  /**
   * Only in a statement seen from an organization's workspace: what the keys it may not see
   * were charged in the period, one sum, so the balances still add up.
   */
  otherKeysChargesNano?: Nano;
}
