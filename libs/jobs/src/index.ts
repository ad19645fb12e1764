export * from './processor';
export * from './queue';
export * from './workflow';
