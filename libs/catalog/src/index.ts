export * from './catalog';
export * from './deprecation';
export * from './notices';
export * from './provider-stats';
export * from './routing';
export * from './tokens';
export * from './plan';
