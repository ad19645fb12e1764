export * from './batch';
export * from './input';
export * from './lines';
export * from './runner';
export * from './request';
export * from './read-models/batches';
