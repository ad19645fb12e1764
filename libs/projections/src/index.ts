export * from './lag';
export * from './projection';
export * from './runner';
export * from './read-models/videos';
export { ReadYourWrites } from './read-your-writes';
export { PROJECTIONS } from './tokens';
