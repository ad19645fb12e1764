/** The activity page's shaping of API answers; pure, so the spec can pin it. */
import { count, usd, when } from '../format';
import type { ActivityRow, Generation, KeyRecord } from '../records';
import { sumUsd } from './overview-data';

/** The filters of GET /v1/activity as the form holds them ('' = not set). */
export interface ActivityFilters {
  date: string;
  key_id: string;
  user: string;
}

export const NO_FILTERS: ActivityFilters = { date: '', key_id: '', user: '' };

/**
 * The query values to send: surrounding spaces trimmed, empty ones left out by `query()` (the API
 * refuses an empty filter as a mistake, so the form must not send one).
 */
export function filterQuery(filters: ActivityFilters): Record<string, string> {
  return { date: filters.date.trim(), key_id: filters.key_id, user: filters.user.trim() };
}

export type ActivityTotals = Pick<
  ActivityRow,
  'requests' | 'requests_not_billed' | 'prompt_tokens' | 'completion_tokens' | 'cached_tokens' | 'reasoning_tokens' | 'usage'
>;

export function activityTotals(rows: ActivityRow[]): ActivityTotals {
  const add = (field: keyof Omit<ActivityTotals, 'usage'>) => rows.reduce((sum, r) => sum + r[field], 0);
  return {
    requests: add('requests'),
    requests_not_billed: add('requests_not_billed'),
    prompt_tokens: add('prompt_tokens'),
    completion_tokens: add('completion_tokens'),
    cached_tokens: add('cached_tokens'),
    reasoning_tokens: add('reasoning_tokens'),
    usage: sumUsd(rows.map((r) => r.usage)),
  };
}

type UnitMeter = 'characters' | 'search_units' | 'queries' | 'seconds' | 'images' | 'audio_input' | 'cached_audio_input' | 'audio_output';

/** The meters other than tokens, in the words of docs/api/account.md "Generations and activity". */
const UNIT_NAMES: Record<UnitMeter, string> = {
  characters: 'characters',
  search_units: 'search units',
  queries: 'queries',
  seconds: 'seconds',
  images: 'images',
  audio_input: 'audio input tokens',
  cached_audio_input: 'cached audio input tokens',
  audio_output: 'audio output tokens',
};

/** What else a row (or a generation's `usage_by_meter`) billed: "3 images", "$0.02 provider cost". */
export function otherUnits(units: Partial<Record<UnitMeter | 'provider_cost', number>>): string[] {
  const out: string[] = [];
  for (const [meter, name] of Object.entries(UNIT_NAMES) as [UnitMeter, string][]) {
    const n = units[meter];
    if (n) out.push(`${count(n)} ${name}`);
  }
  // provider_cost is counted in nano-USD, as the provider reported it.
  if (units.provider_cost) out.push(`${usd(units.provider_cost / 1e9)} provider cost`);
  return out;
}

/** The fields of GET /v1/keys the filter's choice shows. */
export type KeyChoice = Pick<KeyRecord, 'id' | 'name' | 'hint' | 'revoked'>;

/** A key as the filter lists it: its name and hint, which tell keys apart without the secret. */
export function keyLabel(key: KeyChoice): string {
  return `${key.name || key.id} (${key.hint})${key.revoked ? ', revoked' : ''}`;
}

/** Current keys first, then revoked ones (whose past activity still counts), each by name. */
export function keyChoices<K extends KeyChoice>(keys: K[]): K[] {
  return [...keys].sort((a, b) => Number(a.revoked) - Number(b.revoked) || (a.name || a.id).localeCompare(b.name || b.id));
}

function ms(value: number | null): string {
  return value === null ? '—' : `${count(value)} ms`;
}

/**
 * A generation's fields as term and value, in reading order, after its id and status (which the
 * page shows as its heading). `keyName` names its key when the key is one the caller can list.
 */
export function generationFacts(g: Generation, keyName: string | null): [string, string][] {
  const meters = Object.entries(g.usage_by_meter)
    .map(([meter, n]) => (meter === 'provider_cost' ? `provider_cost ${usd(n / 1e9)}` : `${meter} ${count(n)}`))
    .join(', ');
  const facts: [string, string][] = [
    ['Model', g.model],
    ['Provider', g.provider ?? '—'],
    ['Endpoint', g.endpoint],
    ['Key', keyName ? `${keyName} (${g.key_id})` : g.key_id],
    ['Cost', usd(g.total_cost)],
    ['Prompt tokens', count(g.tokens_prompt)],
    ['Completion tokens', count(g.tokens_completion)],
    ['Cached tokens', count(g.tokens_cached)],
    ['Reasoning tokens', count(g.tokens_reasoning)],
    ['Billed by meter', meters || 'nothing billed'],
    ['Latency', ms(g.latency_ms)],
    ['Time to first token', ms(g.time_to_first_token_ms)],
    ['Created', when(g.created_at)],
    ['Finished', when(g.finished_at)],
  ];
  if (g.error_code) facts.push(['Error', g.error_code]);
  if (g.preset) facts.push(['Preset', `${g.preset.slug} (version ${g.preset.version})`]);
  if (g.client_request_id) facts.push(['Client request id', g.client_request_id]);
  if (g.cache_source_id) facts.push(['Repeats (cache hit of)', g.cache_source_id]);
  return facts;
}

/** What the status of a generation means, as a badge level. */
export function statusLevel(status: string): 'ok' | 'warn' | 'bad' | null {
  if (status === 'completed' || status === 'cached') return 'ok';
  if (status === 'failed' || status === 'expired') return 'bad';
  if (status === 'not_billed' || status === 'in_progress') return 'warn';
  return null;
}
