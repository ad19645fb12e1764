export * from './commands';
export * from './decide';
export * from './events';
export { providerKeyContext, providerKeyHint } from './provider-keys';
export * from './state';
export { webhookSecretContext } from './webhook';
