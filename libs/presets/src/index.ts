export * from './preset';
export * from './request';
export * from './apply';
export * from './sealing';
export * from './read-models/presets';
