export { AdminService, type AdjustmentInput, type RecordedAdjustment } from './admin.service';
export { KeyRequest, Omittable, RotateKeyRequest } from './key.request';
export { KeysService, type KeyOwner } from './keys.service';
export { ManagementModule } from './management.module';
export { OrganizationsService } from './organizations.service';
export { parseSettingsPatch, parseWebhookRequest, type SettingsPatch, type WebhookRequest } from './settings.request';
export { presentSettings, presentWebhook, presentWebhookEvent, SettingsService } from './settings.service';
export { maskEmail, parseStepUpCodeRequest, STEP_UP_HEADER, StepUpService } from './step-up.service';
export { presetNotFound, PresetsService, type PresetWithVersions } from './presets.service';
export {
  guardrailNotFound,
  GuardrailsService,
  MAX_ASSIGNMENT_IDS,
  type GuardrailWithBudgets,
  type KeyGuardrail,
  type SubjectBudget,
} from './guardrails.service';
