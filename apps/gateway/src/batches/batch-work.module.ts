import { Module } from '@nestjs/common';
import { ManagementModule } from '@svc/management';
import { ChatCompletionsService } from '../chat/chat-completions.service';
import { RateLimitService } from '../edge/rate-limits';
import { Metering } from '../metering/metering.service';
import { BatchLineCalls } from './batch-line-calls';

/**
 * The metered pipeline and the use cases a batch line runs, without the HTTP edge: the gateway
 * serves requests with them, and every worker runs batch lines with the same ones.
 */
@Module({
  // ReadYourWrites comes from here: one instance per process, shared with the reads that wait on it.
  imports: [ManagementModule],
  providers: [Metering, ChatCompletionsService, RateLimitService, BatchLineCalls],
  exports: [Metering, ChatCompletionsService, RateLimitService, BatchLineCalls],
})
export class BatchWorkModule {}
