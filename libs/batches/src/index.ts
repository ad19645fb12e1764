export * from './batch';
export * from './batch-workflow';
export * from './input';
export * from './line-workflow';
export * from './lines';
export * from './runner';
export * from './request';
export * from './line-calls';
