export * from './calls';
export * from './jobs';
export * from './request';
export * from './runner';
export * from './video';
export * from './workflow';
export * from './read-models/videos';
