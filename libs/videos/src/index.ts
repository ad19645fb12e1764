export * from './request';
export * from './video';
