/**
 * Issue 41 item 5: spec 2.4's `url` ("direct MP4 URL") and spec 4.15's "GET /videos/{id}/content
 * redirects to the MP4" as one thing a browser's `<video src>` can use: a short-lived signed
 * URL, served without a key, which `/content` (with a key) redirects to. The signature (HMAC-
 * SHA256 under a key derived from SVC_ENCRYPTION_KEY) covers the workspace, the video, the
 * variant and the expiry, so a URL opens only that one file of that one workspace, and only
 * until it expires (by the injected clock). A URL handed out is good for its hour whatever
 * happens to the key that asked for it; deleting the video ends it.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { ApiError, type Clock } from '@svc/platform';

export type VideoVariant = 'video' | 'thumbnail';

/** How long a signed content URL works. */
export const CONTENT_URL_TTL_SECONDS = 3600;

export interface SignedContent {
  workspaceId: string;
  videoId: string;
  variant: VideoVariant;
}

export class VideoContentUrls {
  private readonly key: Buffer | null;

  constructor(
    secret: Buffer | null,
    private readonly clock: Clock,
  ) {
    // A key of its own, so a signature never doubles as anything the encryption key protects.
    this.key = secret === null ? null : createHmac('sha256', secret).update('svc video content urls v1').digest();
  }

  /** The signed URL of a video's file, under `base` (scheme and host); null without a secret to sign with. */
  sign(base: string, content: SignedContent): string | null {
    if (this.key === null) return null;
    const expires = Math.floor(this.clock.now().getTime() / 1000) + CONTENT_URL_TTL_SECONDS;
    const query = new URLSearchParams({
      variant: content.variant,
      workspace: content.workspaceId,
      expires: String(expires),
      signature: this.signature(content, expires),
    });
    return `${base}/v1/videos/${content.videoId}/file?${query}`;
  }

  /** What a signed URL opens; 403 when it is not one of ours, is altered, or has expired. */
  verify(videoId: string, query: Record<string, unknown>): SignedContent {
    const { variant, workspace, expires, signature } = query;
    if (this.key === null) throw new ApiError(503, 'service_unavailable', 'Video content URLs need SVC_ENCRYPTION_KEY.', 'storage_unavailable');
    if (
      (variant !== 'video' && variant !== 'thumbnail') ||
      typeof workspace !== 'string' ||
      typeof expires !== 'string' ||
      !/^\d{1,12}$/.test(expires) ||
      typeof signature !== 'string'
    ) {
      throw invalidUrl();
    }
    const content: SignedContent = { workspaceId: workspace, videoId, variant };
    const expected = Buffer.from(this.signature(content, Number(expires)), 'hex');
    const given = Buffer.from(signature, 'hex');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalidUrl();
    if (this.clock.now().getTime() >= Number(expires) * 1000) {
      throw ApiError.permission('This video content URL has expired; GET /v1/videos/{id} (or /content) gives a new one.', 'content_url_expired');
    }
    return content;
  }

  private signature(content: SignedContent, expires: number): string {
    return createHmac('sha256', this.key!).update(`${content.workspaceId}\n${content.videoId}\n${content.variant}\n${expires}`).digest('hex');
  }
}

function invalidUrl(): ApiError {
  return ApiError.permission('This video content URL is not valid: use the url of GET /v1/videos/{id}, as given.', 'content_url_invalid');
}
