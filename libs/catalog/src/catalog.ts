import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { parseCatalog } from './parse';
import { type Catalog, CatalogError } from './types';

export {
  aspectRatioOfSize,
  Catalog,
  CatalogError,
  type CatalogModel,
  type CatalogProvider,
  type CatalogRoute,
  type Deprecation,
  DIALECTS,
  MODALITIES,
  type Modality,
  MODEL_TYPES,
  type ModelPrices,
  type ModelType,
  PARAMETER_NAME,
  parseVideoSize,
  QUANTIZATIONS,
  type Quantization,
  SIZE_RATIO_TOLERANCE,
  type VideoCapabilities,
} from './types';
export { ADAPTERS, type AdapterName } from '@svc/providers';
export { DEFAULT_BATCH_DISCOUNT_PERCENT, parseCatalog } from './parse';

export const BUILTIN_CATALOG_PATH = join(__dirname, 'builtin-catalog.yaml');

/**
 * Reads a catalog file (YAML, or JSON which is YAML too). `env` resolves `api_key_env`.
 * Every problem is reported with its place in the file.
 */
export function loadCatalog(path: string = BUILTIN_CATALOG_PATH, env: Record<string, string | undefined> = process.env): Catalog {
  let doc: unknown;
  try {
    doc = parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new CatalogError(`${path}: ${(err as Error).message}`);
  }
  return parseCatalog(doc, path, env);
}
