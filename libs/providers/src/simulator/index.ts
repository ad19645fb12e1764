export { SIMULATOR_MODELS, startSimulator, type Simulator, type SimulatorOptions } from './server';
export type { SimDirectives } from './directives';
