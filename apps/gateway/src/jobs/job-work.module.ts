import { Module } from '@nestjs/common';
import { ManagementModule } from '@svc/management';
import { BatchLineCalls } from '../batches/batch-line-calls';
import { ChatCompletionsService } from '../chat/chat-completions.service';
import { RateLimitService } from '../edge/rate-limits';
import { BILLING_PROVIDERS } from '../metering/billing.providers';
import { Metering } from '../metering/metering.service';
import { VideoCalls } from '../videos/video-calls';

/**
 * The metered pipeline and the use cases jobs run (batch lines, videos), without the HTTP edge:
 * the gateway serves requests with them, and every worker runs the jobs with the same ones.
 */
@Module({
  // ReadYourWrites comes from here: one instance per process, shared with the reads that wait on it.
  imports: [ManagementModule],
  providers: [Metering, ...BILLING_PROVIDERS, ChatCompletionsService, RateLimitService, BatchLineCalls, VideoCalls],
  exports: [Metering, ...BILLING_PROVIDERS, ChatCompletionsService, RateLimitService, BatchLineCalls, VideoCalls],
})
export class JobWorkModule {}
