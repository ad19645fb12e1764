export * from './preset';
export * from './request';
