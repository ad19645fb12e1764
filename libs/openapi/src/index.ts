export { buildOpenApiDocument, isDocumentable, openApiPath, operationKey, API_VERSION, UNDOCUMENTED } from './document';
export type { OpenApiBuild, OpenApiDocument, Operation, RegisteredRoute } from './document';
export { OPERATIONS } from './operations';
export type { Access, OperationDescription } from './operations';
export { SCHEMAS } from './components';
export { EXTENSION } from './json-schema';
export type { JsonSchema } from './json-schema';
export { WEBHOOK_PAYLOADS } from './webhooks';
export { collectRoutes, RouteList } from './routes';
