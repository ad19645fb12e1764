/**
 * The security page's data (docs/api/settings-webhooks.md, "Email step-up"): the step-up form to the body of
 * PATCH /v1/settings, and what step-up protects, in words. Pure, so the rules are pinned by tests.
 */
import { ApiFailure } from '../api';
import type { StepUpSetting } from '../records';

export interface StepUpForm {
  enabled: boolean;
  email: string;
}

export const stepUpFormOf = (setting: StepUpSetting): StepUpForm => ({ enabled: setting.enabled, email: setting.email ?? '' });

/** Deliberately as plain as the server's check: the code that reaches the address proves it. */
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * The PATCH body. Codes go by email, so step-up cannot be on without an address (the API says
 * `step_up_email_required`); an address left empty while off is cleared.
 */
export function stepUpBody(form: StepUpForm): { step_up: StepUpSetting } {
  const email = form.email.trim();
  if (email === '' && form.enabled) throw new ApiFailure(400, 'step_up_email_required', 'step_up.email', 'Enter the email address the codes are sent to.');
  if (email !== '' && !EMAIL.test(email)) throw new ApiFailure(400, null, 'step_up.email', 'Enter an email address such as ops@example.com.');
  return { step_up: { enabled: form.enabled, email: email === '' ? null : email } };
}

/** Whether the form says something other than the setting. */
export function stepUpChanged(setting: StepUpSetting, form: StepUpForm): boolean {
  return setting.enabled !== form.enabled || (setting.email ?? '') !== form.email.trim();
}

/**
 * The actions a code guards (spec 1, docs/api/settings-webhooks.md "Email step-up"), each with the page of this console
 * where it is done: every one is a /v1 call the signed-in key makes, so each asks for its code.
 */
export const PROTECTED_ACTIONS: { action: string; words: string; page: string }[] = [
  { action: 'create_key', words: 'Creating an API key', page: 'Keys' },
  { action: 'rotate_key', words: 'Rotating an API key', page: 'Keys' },
  { action: 'grant_management', words: 'Creating a key with the management scope, or giving an existing key that scope', page: 'Keys' },
  { action: 'save_webhook', words: 'Saving the webhook endpoint (its URL or event types)', page: 'Webhook' },
  { action: 'save_provider_key', words: 'Saving a provider key (bring your own key)', page: 'Provider keys' },
  { action: 'delete_organization', words: 'Deleting an organization', page: 'Organizations' },
  { action: 'change_step_up', words: 'Changing this setting: turning step-up off or changing its email address', page: 'Security' },
];
