import { format } from 'node:util';
import type { Writable } from 'node:stream';
import type { LoggerService } from '@nestjs/common';
import pino, { type Logger } from 'pino';
import pinoPretty from 'pino-pretty';
import type { Config } from './config';

export type ProcessLog = Logger;

/**
 * The process's logger (issue 22): pino at LOG_LEVEL, one JSON object per line for a log
 * collector, or pino-pretty's single lines for a person at a terminal. Fastify uses it as its
 * own (`loggerInstance`), so request lines and every other line share one format. Pretty
 * printing runs in this process, not in pino's worker-thread transport: it is only chosen at a
 * terminal, where a person reads at human speed.
 */
export function processLog(config: Pick<Config, 'logLevel' | 'logFormat'>, out: Writable & { isTTY?: boolean } = process.stdout): ProcessLog {
  if (!prettyLog(config, out)) return out === process.stdout ? pino({ level: config.logLevel }) : pino({ level: config.logLevel }, out);
  return pino(
    { level: config.logLevel },
    pinoPretty({ destination: out, sync: true, colorize: out.isTTY === true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,reqId' }),
  );
}

/** Whether the process logs for a person (pino-pretty lines) rather than JSON for a collector. */
export function prettyLog(config: Pick<Config, 'logFormat'>, out: { isTTY?: boolean } = process.stdout): boolean {
  return config.logFormat === 'pretty' || (config.logFormat === null && out.isTTY === true);
}

/**
 * Nest's own messages through the same logger, so a collector reads one format. Nest's `log`
 * level is start-up chatter (routes mapped, modules loaded): debug here.
 */
export function nestLogger(log: ProcessLog): LoggerService {
  const split = (params: unknown[]): { context?: string; rest: unknown[] } =>
    params.length > 0 && typeof params[params.length - 1] === 'string'
      ? { context: params[params.length - 1] as string, rest: params.slice(0, -1) }
      : { rest: params };
  const at =
    (level: 'fatal' | 'warn' | 'info' | 'debug' | 'trace') =>
    (message: unknown, ...params: unknown[]) => {
      const { context, rest } = split(params);
      log[level]({ ...(context ? { context } : {}) }, format(message, ...rest));
    };
  return {
    fatal: at('fatal'),
    warn: at('warn'),
    log: at('debug'),
    debug: at('debug'),
    verbose: at('trace'),
    error: (message: unknown, ...params: unknown[]) => {
      // Nest passes (message, stack, context); the stack is a field, not more of the message.
      const { context, rest } = split(params);
      const stack = typeof rest[0] === 'string' ? rest[0] : undefined;
      log.error({ ...(context ? { context } : {}), ...(stack ? { stack } : {}) }, format(message, ...(stack ? rest.slice(1) : rest)));
    },
  };
}

/**
 * A process's warnings and errors written with console.warn and console.error (background
 * loops, lease renewals, projections) go through its logger, so in JSON mode every line on
 * standard output is JSON. The start-up banners are logged too (`info`); only `npm start` at a
 * terminal prints its dev keys as plain text, for the person who started it.
 */
export function routeConsoleThrough(log: { warn(obj: object, msg: string): void; error(obj: object, msg: string): void }): void {
  console.warn = (...args: unknown[]) => log.warn({}, format(...args));
  console.error = (...args: unknown[]) => log.error({}, format(...args));
}
