export * from './move-leases';
export * from './processor';
export * from './queue';
export * from './workflow';
