export * from './lag';
export * from './projection';
export * from './runner';
export { ReadYourWrites } from './read-your-writes';
export { PROJECTIONS } from './tokens';
