import { dirname, join } from 'node:path';
import ts from 'typescript';
import { SCHEMAS } from './components';
import { EXTENSION, type JsonSchema } from './json-schema';

/**
 * Issue 22: our OpenAI-compatible schemas agree with the official openai SDK's types (the
 * devDependency the compatibility tests use): every field we document that is not marked
 * `x-svc-extension` is a field of the SDK's type, under the same name, and every field the SDK
 * requires is documented. Read from its .d.ts files with the TypeScript compiler, not by hand.
 */
const SDK = dirname(require.resolve('openai'));
const FILES = { chat: join(SDK, 'resources/chat/completions/completions.d.ts'), embeddings: join(SDK, 'resources/embeddings.d.ts') };

const program = ts.createProgram(Object.values(FILES), {
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
});
const checker = program.getTypeChecker();

/** The SDK type's properties, with whether each is required. */
function sdkProperties(file: string, name: string): Map<string, { required: boolean }> {
  const source = program.getSourceFile(file);
  if (!source) throw new Error(`${file} is not in the program`);
  // `ChatCompletion.Choice`: an interface inside the SDK's namespace of that name.
  const path = name.split('.');
  let statements: readonly ts.Statement[] = source.statements;
  for (const namespace of path.slice(0, -1)) {
    const module = statements.find(
      (s): s is ts.ModuleDeclaration => ts.isModuleDeclaration(s) && s.name.text === namespace && s.body !== undefined && ts.isModuleBlock(s.body),
    );
    statements = module ? (module.body as ts.ModuleBlock).statements : [];
  }
  const last = path[path.length - 1];
  const declaration = statements.find(
    (s): s is ts.InterfaceDeclaration | ts.TypeAliasDeclaration => (ts.isInterfaceDeclaration(s) || ts.isTypeAliasDeclaration(s)) && s.name.text === last,
  );
  if (!declaration) throw new Error(`${name} is not declared in ${file}`);
  const type = checker.getTypeAtLocation(declaration.name);
  return new Map(checker.getPropertiesOfType(type).map((p) => [p.name, { required: (p.flags & ts.SymbolFlags.Optional) === 0 }]));
}

/** A schema's properties (following one `$ref` into components), split by the extension mark. */
function ours(schema: JsonSchema): { openai: string[]; extensions: string[] } {
  const resolved = typeof schema.$ref === 'string' ? SCHEMAS[schema.$ref.split('/').pop()!] : schema;
  const properties = (resolved.properties ?? {}) as Record<string, JsonSchema>;
  const isExtension = (s: JsonSchema) => s[EXTENSION] === true;
  return {
    openai: Object.keys(properties).filter((k) => !isExtension(properties[k])),
    extensions: Object.keys(properties).filter((k) => isExtension(properties[k])),
  };
}

const property = (schema: JsonSchema, ...path: string[]): JsonSchema =>
  path.reduce<JsonSchema>((s, key) => {
    const resolved = typeof s.$ref === 'string' ? SCHEMAS[s.$ref.split('/').pop()!] : s;
    const next = key === '[]' ? (resolved.items as JsonSchema) : (resolved.properties as Record<string, JsonSchema>)[key];
    if (!next) throw new Error(`no ${key} in the schema`);
    return next;
  }, schema);

/** [our schema, the SDK's type, the schema, the SDK's file]. */
const PAIRS: [string, string, JsonSchema, keyof typeof FILES][] = [
  ['ChatCompletionRequest', 'ChatCompletionCreateParamsBase', SCHEMAS.ChatCompletionRequest, 'chat'],
  ['ChatCompletion', 'ChatCompletion', SCHEMAS.ChatCompletion, 'chat'],
  ['ChatCompletion.choices[]', 'ChatCompletion.Choice', property(SCHEMAS.ChatCompletion, 'choices', '[]'), 'chat'],
  ['ChatCompletion.choices[].message', 'ChatCompletionMessage', property(SCHEMAS.ChatCompletion, 'choices', '[]', 'message'), 'chat'],
  ['EmbeddingsRequest', 'EmbeddingCreateParams', SCHEMAS.EmbeddingsRequest, 'embeddings'],
  ['EmbeddingsResponse', 'CreateEmbeddingResponse', SCHEMAS.EmbeddingsResponse, 'embeddings'],
  ['Embedding', 'Embedding', SCHEMAS.Embedding, 'embeddings'],
];

describe('our OpenAI-compatible schemas and the openai SDK 6.49 types', () => {
  it.each(PAIRS)("%s: every field not marked x-svc-extension is a field of the SDK's %s", (_, sdkType, schema, file) => {
    const sdk = sdkProperties(FILES[file], sdkType);
    expect(sdk.size).toBeGreaterThan(2);
    expect(ours(schema).openai.filter((name) => !sdk.has(name))).toEqual([]);
  });

  it.each(PAIRS)("%s: every field the SDK's %s requires is documented, and no extension shadows an SDK field", (_, sdkType, schema, file) => {
    const sdk = sdkProperties(FILES[file], sdkType);
    const { openai, extensions } = ours(schema);
    const requiredBySdk = [...sdk].filter(([, p]) => p.required).map(([name]) => name);
    expect(requiredBySdk.filter((name) => !openai.includes(name))).toEqual([]);
    // A field the SDK has is OpenAI's, not ours: marking it an extension would hide a disagreement.
    expect(extensions.filter((name) => sdk.has(name))).toEqual([]);
  });

  it("usage: OpenAI's CompletionUsage fields plus `cost`, the one extension (spec 2.6)", () => {
    const sdk = sdkProperties(join(SDK, 'resources/completions.d.ts'), 'CompletionUsage');
    const { openai, extensions } = ours(SCHEMAS.ChatUsage);
    expect(openai.filter((name) => !sdk.has(name))).toEqual([]);
    expect(
      [...sdk]
        .filter(([, p]) => p.required)
        .map(([n]) => n)
        .filter((n) => !openai.includes(n)),
    ).toEqual([]);
    expect(extensions).toEqual(expect.arrayContaining(['cost']));
  });
});
