import { Module } from '@nestjs/common';
import { ManagementModule } from '@svc/management';
import { BatchLineCalls } from '../apps/gateway/src/batches/batch-line-calls';
import { ChatCompletionsService } from '../apps/gateway/src/chat/chat-completions.service';
import { RateLimitService } from '../apps/gateway/src/edge/rate-limits';
import { BILLING_PROVIDERS } from '../apps/gateway/src/metering/billing.providers';
import { Metering } from '../apps/gateway/src/metering/metering.service';
import { VideoCalls } from '../apps/gateway/src/videos/video-calls';

/**
 * The metered pipeline and the use cases jobs run (batch lines, videos), without the HTTP edge:
 * the gateway serves requests with them, and every worker runs the jobs with the same ones.
 * Composition only, so it lives with the other composition roots: the worker takes it from
 * here and imports nothing of the gateway app itself.
 */
@Module({
  // ReadYourWrites comes from here: one instance per process, shared with the reads that wait on it.
  imports: [ManagementModule],
  providers: [Metering, ...BILLING_PROVIDERS, ChatCompletionsService, RateLimitService, BatchLineCalls, VideoCalls],
  exports: [Metering, ...BILLING_PROVIDERS, ChatCompletionsService, RateLimitService, BatchLineCalls, VideoCalls],
})
export class JobWorkModule {}
