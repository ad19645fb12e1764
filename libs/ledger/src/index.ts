export * from './account';
export * from './auditor';
export * from './hold-expiry';
export * from './hold-reaper';
export * from './ledger.module';
export * from './pricing';
export * from './spend-window';
