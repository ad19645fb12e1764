export * from './billing';
export * from './events';
export * from './limits';
export * from './session-billing';
