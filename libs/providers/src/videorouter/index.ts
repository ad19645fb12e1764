/** A video aggregator's API (`POST /videos/generations`, cost reported per clip): video only. */
import type { ProviderDeclaration } from '../provider';
import { VIDEOROUTER_VIDEO_PARAMETERS, VideoRouterAdapter } from './client';

export const videorouter: ProviderDeclaration = {
  operations: { video: VIDEOROUTER_VIDEO_PARAMETERS },
  client: (options) => new VideoRouterAdapter(options),
};

export { VIDEOROUTER_VIDEO_PARAMETERS, VideoRouterAdapter } from './client';
