/**
 * GET /responses/{id}/input_items (spec 4.5): one page of a stored response's input items in
 * OpenAI's list shape, newest first unless `order=asc`, `limit` 1 to 100 (default 20), `after`
 * the id of the item the page starts after. Pure.
 */
import type { ResponseItem } from '@svc/interfaces';
import { DomainError } from '@svc/platform';

export interface ItemList {
  object: 'list';
  data: ResponseItem[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export const DEFAULT_ITEMS_LIMIT = 20;
export const MAX_ITEMS_LIMIT = 100;

/** `query` as Fastify parses a query string: strings, or arrays of them for repeated names. */
export function listInputItems(items: readonly ResponseItem[], query: Record<string, unknown>): ItemList {
  const order = single(query, 'order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw DomainError.invalid("order must be 'asc' or 'desc'.", 'order');
  const limitText = single(query, 'limit');
  const limit = limitText === undefined ? DEFAULT_ITEMS_LIMIT : Number(limitText);
  if (!/^\d+$/.test(limitText ?? '1') || limit < 1 || limit > MAX_ITEMS_LIMIT) {
    throw DomainError.invalid(`limit must be an integer from 1 to ${MAX_ITEMS_LIMIT}.`, 'limit');
  }
  const ordered = order === 'asc' ? [...items] : [...items].reverse();
  const after = single(query, 'after');
  let start = 0;
  if (after !== undefined) {
    const at = ordered.findIndex((item) => item.id === after);
    if (at < 0) throw DomainError.invalid(`after must be the id of an input item of this response; ${JSON.stringify(after)} is not.`, 'after');
    start = at + 1;
  }
  const data = ordered.slice(start, start + limit);
  return {
    object: 'list',
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: start + limit < ordered.length,
  };
}

function single(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw DomainError.invalid(`${name} must be given once.`, name);
  return value;
}
