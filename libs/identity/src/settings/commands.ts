/**
 * Commands of the settings aggregate. Values are checked at the edge (URL form and safety,
 * event type names, the provider against the catalog); the decider keeps the rules that need
 * the stream's state, and the last line of defence for secrets (sealed or refused).
 */
export type SettingsCommand =
  | { type: 'SaveProviderKey'; accountId: string; provider: string; encryptedKey: string; hint: string }
  | { type: 'DeleteProviderKey'; accountId: string; provider: string }
  | { type: 'SetPromptLogging'; accountId: string; enabled: boolean; retentionDays: number }
  | { type: 'SetStepUp'; accountId: string; enabled: boolean; email: string | null }
  /** `webhookId` and `encryptedSecret` are used only when no endpoint exists yet (ids and secrets are made at the edge: deciders stay pure). */
  | { type: 'SaveWebhook'; accountId: string; webhookId: string; url: string; events: string[] | null; encryptedSecret: string }
  | { type: 'RotateWebhookSecret'; accountId: string; encryptedSecret: string }
  | { type: 'DeleteWebhook'; accountId: string }
  | { type: 'ResumeWebhook'; accountId: string }
  /** The dispatcher's report of one delivery attempt to `webhookId` (spec 3.3: pause after 20 consecutive failures). */
  | { type: 'RecordWebhookDelivery'; accountId: string; webhookId: string; eventId: string; delivered: boolean };
