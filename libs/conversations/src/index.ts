export * from './input-items';
export * from './stored-images';
export * from './stored-responses';
export * from './sealed-content';
export * from './prompt-logs';
