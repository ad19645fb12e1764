import { MODALITIES, MODEL_TYPES, PARAMETER_NAME, type CatalogModel, type Modality, type ModelType } from '@svc/catalog';
import { ApiError } from '@svc/platform';

/** The filters of GET /v1/models and /v1/models/count (spec 4.17); a model must match all of them. */
export interface ModelFilters {
  type: ModelType | null;
  supportedParameters: string[];
  inputModalities: Modality[];
  outputModalities: Modality[];
}

/**
 * Reads the query string. Types and modalities come from closed lists and parameter names
 * must look like one, so a typo is a 400 naming the parameter rather than an empty list. An
 * empty value (`?type=`) is no filter; other query parameters are ignored, as OpenAI does.
 */
export function parseModelFilters(query: Record<string, unknown>): ModelFilters {
  const text = (param: string): string | null => {
    const value = query[param];
    if (value === undefined || value === '') return null;
    if (typeof value !== 'string') throw ApiError.invalidRequest(`'${param}' may be given only once (a comma-separated list).`, param);
    return value;
  };
  const items = <T extends string>(param: string, valid: (item: string) => item is T, expected: string): T[] => {
    const value = text(param);
    if (value === null) return [];
    return value.split(',').map((raw) => {
      const item = raw.trim();
      if (!valid(item)) throw ApiError.invalidRequest(`'${param}' has ${JSON.stringify(item)}; expected ${expected}.`, param);
      return item;
    });
  };
  const modality = (x: string): x is Modality => (MODALITIES as readonly string[]).includes(x);
  const modalities = `a comma-separated list of ${MODALITIES.join(', ')}`;
  const type = text('type');
  if (type !== null && !(MODEL_TYPES as readonly string[]).includes(type)) {
    throw ApiError.invalidRequest(`'type' must be one of ${MODEL_TYPES.join(', ')}.`, 'type');
  }
  return {
    type: type as ModelType | null,
    supportedParameters: items(
      'supported_parameters',
      (x): x is string => PARAMETER_NAME.test(x),
      'a comma-separated list of parameter names such as tools,max_tokens',
    ),
    inputModalities: items('input_modalities', modality, modalities),
    outputModalities: items('output_modalities', modality, modalities),
  };
}

export function matchesFilters(model: CatalogModel, f: ModelFilters): boolean {
  return (
    (f.type === null || model.type === f.type) &&
    f.supportedParameters.every((p) => model.supportedParameters.includes(p)) &&
    f.inputModalities.every((m) => model.inputModalities.includes(m)) &&
    f.outputModalities.every((m) => model.outputModalities.includes(m))
  );
}
