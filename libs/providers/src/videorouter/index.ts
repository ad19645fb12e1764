/** A video aggregator's API (`POST /videos/generations`, cost reported per clip): video only. */
import { declareProvider } from '../provider';
import { singleOperationConnection } from '../single-operation';
import { video } from './video';

export const videorouter = declareProvider(singleOperationConnection, {
  video,
});

export { VIDEOROUTER_VIDEO_PARAMETERS } from './video';
