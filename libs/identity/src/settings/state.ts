import type { SettingsEvent } from './events';

export interface WebhookState {
  id: string;
  url: string;
  events: readonly string[] | null;
  paused: boolean;
  consecutiveFailures: number;
}

export interface SettingsState {
  /** Hints of the saved provider keys, by provider name. */
  providerKeys: Readonly<Record<string, string>>;
  promptLogging: { enabled: boolean; retentionDays: number };
  stepUp: { enabled: boolean; email: string | null };
  webhook: WebhookState | null;
}

/** Spec 1: prompt logging is off by default; 30 days is what turning it on keeps unless told otherwise. */
export const initialSettingsState = (): SettingsState => ({
  providerKeys: {},
  promptLogging: { enabled: false, retentionDays: 30 },
  stepUp: { enabled: false, email: null },
  webhook: null,
});

export function evolveSettings(state: SettingsState, event: SettingsEvent): SettingsState {
  const webhook = state.webhook;
  switch (event.type) {
    case 'ProviderKeySaved':
      return { ...state, providerKeys: { ...state.providerKeys, [event.data.provider]: event.data.hint } };
    case 'ProviderKeyDeleted': {
      const { [event.data.provider]: _deleted, ...rest } = state.providerKeys;
      return { ...state, providerKeys: rest };
    }
    case 'PromptLoggingSet':
      return { ...state, promptLogging: { enabled: event.data.enabled, retentionDays: event.data.retention_days } };
    case 'StepUpSet':
      return { ...state, stepUp: { enabled: event.data.enabled, email: event.data.email } };
    case 'WebhookSaved':
      // Saving the endpoint (a fixed URL, say) starts it afresh: not paused, no failures counted.
      return { ...state, webhook: { id: event.data.webhook_id, url: event.data.url, events: event.data.events, paused: false, consecutiveFailures: 0 } };
    case 'WebhookDeleted':
      return { ...state, webhook: null };
    case 'WebhookSecretRotated':
      return state;
    case 'WebhookDeliveryFailed':
      return webhook ? { ...state, webhook: { ...webhook, consecutiveFailures: event.data.consecutive_failures } } : state;
    case 'WebhookDeliveryRecovered':
      return webhook ? { ...state, webhook: { ...webhook, consecutiveFailures: 0 } } : state;
    case 'WebhookPaused':
      return webhook ? { ...state, webhook: { ...webhook, paused: true } } : state;
    case 'WebhookResumed':
      return webhook ? { ...state, webhook: { ...webhook, paused: false, consecutiveFailures: 0 } } : state;
  }
}
