import { EventEmitter } from 'node:events';

/**
 * What undici watches to abort one call: an EventEmitter with `aborted` and `reason`, which its
 * request() takes as it takes an AbortSignal. Not an AbortSignal: on Node 20 each new one gets a
 * hidden class of its own (its prototype is swapped after it is made; nodejs/node#52408, fixed
 * in Node 22), and one per call sent some 0.5 KB of every call to the old generation, whose full
 * collections then came every two seconds under load (docs/BENCHMARKS.md, twenty-fourth round).
 */
export class CallSignal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}
