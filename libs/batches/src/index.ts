export * from './batch';
export * from './input';
