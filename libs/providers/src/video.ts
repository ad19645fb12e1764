/**
 * What the video adapters (spec 4.15; `openai/` and `videorouter/`) share: reading a provider's
 * job object into the gateway's VideoJob, whatever names it uses, and the request fields as a
 * provider is sent them.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { usdToNano } from '@svc/platform';
import { isRecord } from './json';
import { VIDEO_STATUSES, type VideoJob, type VideoJobRequest, type VideoStatus } from './provider';
import { invalidResponse } from './transport';

/** The header OpenAI's SDKs poll by (WIRE-FORMATS 2). */
export const POLL_AFTER_HEADER = 'openai-poll-after-ms';

/** The fields that were given: null means "not given" in a VideoJobRequest, and is not sent. */
export function givenFields(body: VideoJobRequest): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== null && value !== undefined));
}

/** The parts of a provider's job object the gateway reads, before any provider-specific field. */
export interface JobFields {
  /** Where `costNano` comes from: a USD number, or undefined where the provider reports none. */
  costUsd?: unknown;
  url?: unknown;
}

/** A provider's job object as a VideoJob; anything that is not one is an invalid response. */
export function videoJobFrom(
  json: unknown,
  headers: IncomingHttpHeaders | undefined,
  provider: string,
  fields: (job: Record<string, unknown>) => JobFields,
): VideoJob {
  if (!isRecord(json) || typeof json.id !== 'string' || json.id === '') throw invalidResponse(`${provider} video job without an id`, json);
  const status = json.status;
  if (!VIDEO_STATUSES.includes(status as VideoStatus)) throw invalidResponse(`${provider} video job with an unknown status ${JSON.stringify(status)}`, json);
  const { costUsd, url } = fields(json);
  return {
    id: json.id,
    status: status as VideoStatus,
    progress: progressOf(json.progress, status as VideoStatus),
    error: errorOf(json.error, status as VideoStatus),
    costNano: costUsd === undefined || costUsd === null ? null : costOf(costUsd, provider, json),
    pollAfterMs: pollAfterOf(headers),
    url: typeof url === 'string' && url !== '' ? url : null,
  };
}

/** Whole percent: OpenAI calls its progress approximate (a number), and a provider may leave it out. */
function progressOf(value: unknown, status: VideoStatus): number {
  if (status === 'completed') return 100;
  if (typeof value !== 'number' || !Number.isFinite(value)) return 0;
  return Math.min(100, Math.max(0, Math.round(value)));
}

/** `{code, message}`; a failed job always has one, so the gateway has something to show (spec 2.4). */
function errorOf(value: unknown, status: VideoStatus): VideoJob['error'] {
  if (isRecord(value) && (typeof value.message === 'string' || typeof value.code === 'string')) {
    return {
      code: typeof value.code === 'string' && value.code !== '' ? value.code : 'video_generation_failed',
      message: typeof value.message === 'string' ? value.message : String(value.code),
    };
  }
  if (typeof value === 'string' && value !== '') return { code: 'video_generation_failed', message: value };
  return status === 'failed' ? { code: 'video_generation_failed', message: 'the provider reported the video as failed without a reason' } : null;
}

/**
 * USD as the provider wrote it, to nano exactly: usdToNano reads a number's shortest decimal
 * form, so `0.35` is 350000000n, not the double's binary expansion. A number that carries
 * floating-point noise below the nano (a router's `7 * 0.05` is 0.35000000000000003) rounds to
 * the nearest nano: that noise is not a price. Negative, non-finite or non-numeric is invalid.
 */
function costOf(value: unknown, provider: string, json: unknown): bigint {
  try {
    if (typeof value === 'string') return usdToNano(value);
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0) {
      const written = String(value);
      return usdToNano(/^\d+(\.\d{1,9})?$/.test(written) ? written : value.toFixed(NANO_DECIMALS));
    }
  } catch {
    // Falls through to the error below, as a non-number does.
  }
  throw invalidResponse(`${provider} video job with a cost that is not a USD amount: ${JSON.stringify(value)}`, json);
}

const NANO_DECIMALS = 9;

function pollAfterOf(headers: IncomingHttpHeaders | undefined): number | null {
  const raw = headers?.[POLL_AFTER_HEADER];
  const text = Array.isArray(raw) ? raw[0] : raw;
  return text !== undefined && /^\s*\d+\s*$/.test(text) ? Number(text) : null;
}
