export * from './billing';
export * from './events';
export * from './limits';
