import { Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { CqrsModule } from '@nestjs/cqrs';
import { IdentityModule } from '@svc/identity';
import { LedgerModule, LedgerQueriesModule } from '@svc/ledger';
import type { Runtime } from '@svc/runtime';
import { AccountController } from './account/account.controller';
import { StatementController } from './account/statement.controller';
import { OrganizationsController } from './account/organizations.controller';
import { ProviderKeysController } from './account/provider-keys.controller';
import { ChatCompletionsController } from './chat/chat-completions.controller';
import { EmbeddingsController } from './embeddings/embeddings.controller';
import { FilesController } from './files/files.controller';
import { BatchesController } from './batches/batches.controller';
import { VideosController } from './videos/videos.controller';
import { JobWorkModule } from '../../../src/job-work.module';
import { ImagesController } from './images/images.controller';
import { CompletionsController } from './completions/completions.controller';
import { RateLimitService } from './edge/rate-limits';
import { EdgeResponses } from './edge/replay';
import { ApiKeyGuard } from './http/auth.guard';
import { ApiErrorFilter } from './http/error.filter';
import { MessagesController } from './messages/messages.controller';
import { ResponsesController } from './responses/responses.controller';
import { AdminController } from './admin/admin.controller';
import { AdminGuard } from './admin/admin.guard';
import { CurrentKeyController, KeysController } from './keys/keys.controller';
import { ManagementModule } from '@svc/management';
import { ModelsController } from './models/models.controller';
import { ModerationsController } from './moderations/moderations.controller';
import { RerankController } from './rerank/rerank.controller';
import { SearchController } from './search/search.controller';
import { PresetsController } from './presets/presets.controller';
import { GuardrailsController } from './guardrails/guardrails.controller';
import { PromptLogsController } from './settings/prompt-logs.controller';
import { SettingsController, StepUpController, WebhookEventsController } from './settings/settings.controller';
import { SpeechController } from './audio/speech.controller';
import { TranscriptionsController } from './audio/transcriptions.controller';
import { RuntimeModule } from '@svc/runtime';
import { RealtimeUpgrade } from './realtime/realtime-upgrade';
import { HealthController } from './health/health.controller';
import { HealthService } from './health/health.service';
import { MetricsController } from './metrics/metrics.controller';

@Module({})
export class GatewayModule {
  static forRoot(runtime: Runtime): DynamicModule {
    return {
      module: GatewayModule,
      imports: [RuntimeModule.forRoot(runtime), CqrsModule.forRoot(), LedgerModule, IdentityModule, LedgerQueriesModule, ManagementModule, JobWorkModule],
      controllers: [
        SettingsController,
        PresetsController,
        GuardrailsController,
        PromptLogsController,
        StepUpController,
        WebhookEventsController,
        ChatCompletionsController,
        EmbeddingsController,
        RerankController,
        SearchController,
        ModerationsController,
        ImagesController,
        SpeechController,
        TranscriptionsController,
        MessagesController,
        ResponsesController,
        CompletionsController,
        FilesController,
        BatchesController,
        VideosController,
        AccountController,
        StatementController,
        ProviderKeysController,
        OrganizationsController,
        KeysController,
        CurrentKeyController,
        AdminController,
        ModelsController,
        HealthController,
        // Issue 22: on the main port only when SVC_METRICS_PORT does not serve it on its own.
        ...(runtime.config.metricsPort === null ? [MetricsController] : []),
      ],
      providers: [ApiKeyGuard, RateLimitService, EdgeResponses, AdminGuard, RealtimeUpgrade, HealthService, { provide: APP_FILTER, useClass: ApiErrorFilter }],
    };
  }
}
