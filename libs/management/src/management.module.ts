import { Module } from '@nestjs/common';
import { IdentityModule } from '@svc/identity';
import { LedgerModule } from '@svc/ledger';
import { ReadYourWritesModule } from '@svc/projections';
import { AdminService } from './admin.service';
import { KeysService } from './keys.service';
import { SettingsService } from './settings.service';
import { StepUpService } from './step-up.service';
import { PresetsService } from './presets.service';
import { OrganizationsService } from './organizations.service';
import { GuardrailsService } from './guardrails.service';

/**
 * Account and key management (spec 4.19, the operator API): the use cases the HTTP controllers,
 * the CLI and the dev bootstrap share. Needs the command bus (CqrsModule) and the process's
 * READ_DB, CLOCK, CONFIG, CATALOG and PROJECTIONS, which a composition root provides.
 */
@Module({
  imports: [LedgerModule, IdentityModule, ReadYourWritesModule],
  providers: [KeysService, AdminService, SettingsService, StepUpService, PresetsService, OrganizationsService, GuardrailsService],
  exports: [ReadYourWritesModule, KeysService, AdminService, SettingsService, StepUpService, PresetsService, OrganizationsService, GuardrailsService],
})
export class ManagementModule {}
