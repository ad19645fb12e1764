export * from './authenticate';
export * from './identity.module';
export * from './key';
export * from './organization';
export * from './permissions';
export * from './restrictions';
export * from './secrets';
export * from './settings/index';
