/** What the descriptions of more than one family of operations are built from. */
import { constant, int, type JsonSchema, obj, oneOfValues, str } from '../json-schema';
import type { QueryParameter } from './types';

export const json = (schema: JsonSchema) => ({ schema });
export const limitQuery = (max: number, fallback: number): QueryParameter => ({
  name: 'limit',
  schema: int(undefined, { minimum: 1, maximum: max, default: fallback }),
});
export const afterQuery: QueryParameter = { name: 'after', schema: str(), description: 'cursor: the last id of the previous page' };
export const orderQuery: QueryParameter = { name: 'order', schema: oneOfValues(['asc', 'desc']), description: 'default desc' };
export const deleted = (more: Record<string, JsonSchema> = {}) => obj({ ...more, deleted: constant(true) });
export const gen = { 'x-svc-generation-id': 'the generation id (GET /v1/generation?id=...)' };
export const genCost = { ...gen, 'x-svc-cost': 'USD charged' };
export const memberBody = obj({ account_id: str(), role: oneOfValues(['admin', 'member']) });
export const roleBody = obj({ role: oneOfValues(['admin', 'member']) });
