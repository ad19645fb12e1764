export * from './file-store';
export * from './jsonl';
