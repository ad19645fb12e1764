export * from './delivery';
export * from './delivery-workflow';
export * from './dispatcher';
export * from './event-types';
export * from './outbox';
export * from './signature';
export * from './notice-mail';
export * from './read-models/notifications';
