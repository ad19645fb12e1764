import { arr, constant, dataOf, int, obj, oneOfValues, ref, str } from '../json-schema';
import { json, deleted } from './shared';
import type { OperationDescription, QueryParameter } from './types';

const modelFilters: QueryParameter[] = [
  { name: 'type', schema: oneOfValues(['chat', 'embedding', 'image', 'audio', 'rerank', 'moderation', 'search', 'video', 'realtime']) },
  { name: 'supported_parameters', schema: str(), description: 'comma-separated; all must match' },
  { name: 'input_modalities', schema: str(), description: 'comma-separated; all must match' },
  { name: 'output_modalities', schema: str(), description: 'comma-separated; all must match' },
];

/** Spec 4.17: models; spec 4.18: presets. */
export const MODELS_AND_PRESETS_OPERATIONS: Record<string, OperationDescription> = {
  'GET /v1/models': {
    summary: 'List usable models',
    description: 'Spec 4.17.',
    tag: 'Models catalog',
    access: 'any',
    query: modelFilters,
    ok: { schema: obj({ object: constant('list'), data: arr(ref('Model')) }) },
  },
  'GET /v1/models/count': {
    summary: 'Count models for the same filters',
    tag: 'Models catalog',
    access: 'any',
    query: modelFilters,
    ok: { schema: dataOf(obj({ count: int() })) },
  },
  'GET /v1/models/*': {
    path: '/v1/models/{id}',
    summary: 'Retrieve a model with its providers',
    tag: 'Models catalog',
    access: 'any',
    pathParameters: { id: 'model id, the rest of the path: encoded (`sim%2Fecho`, as OpenAPI clients send it) or with its `/` as is (`/v1/models/sim/echo`)' },
    ok: { schema: ref('ModelWithProviders') },
    errors: [404],
  },
  // Spec 4.18: presets.
  'GET /v1/presets': { summary: "List the workspace's presets", tag: 'Presets', access: 'any', ok: { schema: dataOf(arr(ref('Preset'))) } },
  'POST /v1/presets': {
    summary: 'Create a preset',
    tag: 'Presets',
    access: 'management',
    body: json(ref('PresetRequest')),
    ok: { status: 201, schema: dataOf(ref('PresetWithVersions')) },
    errors: [409],
  },
  'GET /v1/presets/:slug': {
    summary: 'A preset with its versions',
    tag: 'Presets',
    access: 'any',
    ok: { schema: dataOf(ref('PresetWithVersions')) },
    errors: [404],
  },
  'PATCH /v1/presets/:slug': {
    summary: 'Update a preset (a config change adds a version)',
    tag: 'Presets',
    access: 'management',
    body: json(ref('PresetRequest')),
    ok: { schema: dataOf(ref('PresetWithVersions')) },
    errors: [404],
  },
  'DELETE /v1/presets/:slug': { summary: 'Delete a preset', tag: 'Presets', access: 'management', ok: { schema: deleted({ slug: str() }) }, errors: [404] },
  'POST /v1/presets/:slug/rollback': {
    summary: "Make an earlier version's config the latest",
    tag: 'Presets',
    access: 'management',
    body: json(obj({ version: int(undefined, { minimum: 1 }) })),
    ok: { schema: dataOf(ref('PresetWithVersions')) },
    errors: [404],
  },
};
