import { accountStream } from '@svc/ledger';
import { usdToNano } from '@svc/platform';
import type { Runtime } from '@svc/runtime';

interface PresentedLine {
  meter: string;
  quantity: number;
  unit_price: number;
  amount: number;
}

/**
 * Issue 23: a generation's `cost_lines` as `[meter, quantity, unit_price, amount in nano-USD]`,
 * after checking that the amounts add up to its `total_cost` exactly, to the nano.
 */
export function costLinesOf(generation: { total_cost: number; cost_lines: PresentedLine[] | null }): [string, number, number, bigint][] {
  if (generation.cost_lines === null) throw new Error(`no cost lines: ${JSON.stringify(generation)}`);
  const lines = generation.cost_lines.map((l): [string, number, number, bigint] => [
    l.meter,
    l.quantity,
    l.unit_price,
    usdToNano(l.amount, { allowNegative: true }),
  ]);
  const sum = lines.reduce((total, [, , , amount]) => total + amount, 0n);
  if (sum !== usdToNano(generation.total_cost))
    throw new Error(`cost lines add up to ${sum} nano-USD, total_cost is ${usdToNano(generation.total_cost)}: ${JSON.stringify(generation.cost_lines)}`);
  return lines;
}

/** What the log recorded of a generation's charge (the provider cost is never shown to the account). */
export async function chargeEventOf(runtime: Runtime, accountId: string, generationId: string): Promise<Record<string, unknown>> {
  const events = await runtime.store.readStream(accountStream(accountId));
  const charge = events.find((e) => e.type === 'UsageCharged' && (e.data as { hold_id: string }).hold_id === generationId);
  if (!charge) throw new Error(`no UsageCharged for ${generationId}`);
  return charge.data as Record<string, unknown>;
}

/**
 * What a chat completion's answer says it cost, in nano-USD: its `usage.cost`, for a stream the
 * last frame's (after checking no frame is an error); 0n for any answer but a 200.
 */
export function answeredCost(answer: { status: number; json: any }, stream: boolean): bigint {
  if (answer.status !== 200) return 0n;
  if (!stream) return usdToNano(answer.json.usage.cost);
  const frames = (answer.json as string)
    .split('\n\n')
    .filter((f) => f.startsWith('data: ') && f !== 'data: [DONE]')
    .map((f) => JSON.parse(f.slice(6)));
  if (frames.some((f) => f.error)) throw new Error(`an error frame in a 200 stream: ${answer.json}`);
  return usdToNano(frames[frames.length - 1].usage.cost);
}
