/**
 * The simulated moderation model (`POST /v1/moderations`). A category is flagged when its
 * trigger word appears in the input (a whole word, case folded, optionally ending in s, ed or
 * ing; for images, in the image URL):
 *
 * | category                 | trigger      | | category                 | trigger      |
 * |--------------------------|--------------|-|--------------------------|--------------|
 * | harassment               | idiot        | | self-harm                | self-harm    |
 * | harassment/threatening   | threaten     | | self-harm/intent         | suicide      |
 * | hate                     | racist       | | self-harm/instructions   | overdose     |
 * | hate/threatening         | exterminate  | | sexual                   | explicit     |
 * | illicit                  | shoplift     | | sexual/minors            | underage     |
 * | illicit/violent          | bomb         | | violence                 | kill         |
 * |                          |              | | violence/graphic         | gore         |
 *
 * A flagged category scores 0.95 (its parent, e.g. `violence` for `violence/graphic`, at least
 * as much, so a sub-category never stands alone); the others score below 0.01, from a hash of
 * the input. A category is true at 0.5 and above; `flagged` is true when any category is.
 *
 * A string or an array of strings gets one result per string. An array of `text` / `image_url`
 * parts (omni models) gets ONE result over all parts, as OpenAI does, where
 * `category_applied_input_types` names the kinds of input each category was judged on: images
 * only count for the image-capable categories (self-harm*, sexual, violence*).
 * `text-moderation-*` models refuse image parts. The `#sim` directives come from the text
 * inputs; `empty` answers `results: []`.
 */
import { createHash } from 'node:crypto';
import { isRecord } from '../json';
import { parseDirectives, type SimDirectives } from './directives';
import { SimError } from './http';

export const MODERATION_TRIGGERS = {
  harassment: 'idiot',
  'harassment/threatening': 'threaten',
  hate: 'racist',
  'hate/threatening': 'exterminate',
  illicit: 'shoplift',
  'illicit/violent': 'bomb',
  'self-harm': 'self-harm',
  'self-harm/intent': 'suicide',
  'self-harm/instructions': 'overdose',
  sexual: 'explicit',
  'sexual/minors': 'underage',
  violence: 'kill',
  'violence/graphic': 'gore',
} as const;

export type ModerationCategory = keyof typeof MODERATION_TRIGGERS;
export const MODERATION_CATEGORIES = Object.keys(MODERATION_TRIGGERS) as ModerationCategory[];
const IMAGE_CATEGORIES = new Set<ModerationCategory>(['self-harm', 'self-harm/intent', 'self-harm/instructions', 'sexual', 'violence', 'violence/graphic']);

type InputType = 'text' | 'image';

/** What one result judges: its texts and image URLs. */
export interface ModerationSubject {
  texts: string[];
  images: string[];
}

export interface ModerationRequest {
  model: string;
  subjects: ModerationSubject[];
  directives: SimDirectives;
}

export interface ModerationResult {
  flagged: boolean;
  categories: Record<ModerationCategory, boolean>;
  category_scores: Record<ModerationCategory, number>;
  category_applied_input_types: Record<ModerationCategory, InputType[]>;
}

const DEFAULT_MODEL = 'omni-moderation-latest';
const FLAGGED_SCORE = 0.95;
const THRESHOLD = 0.5;

export function parseModerationRequest(body: unknown): ModerationRequest {
  if (!isRecord(body)) throw new SimError(400, 'request body must be a JSON object');
  const model = body.model ?? DEFAULT_MODEL;
  if (typeof model !== 'string' || model === '') throw new SimError(400, 'model must be a non-empty string', 'model');
  const subjects = subjectsOf(body.input);
  if (model.startsWith('text-moderation') && subjects.some((s) => s.images.length > 0)) {
    throw new SimError(400, `model '${model}' moderates text only; image inputs need an omni-moderation model`, 'input');
  }
  // Directive lines are stripped from what is judged, so `#sim` JSON never trips a trigger word.
  const directives: SimDirectives = {};
  const stripped = subjects.map((s) => ({
    images: s.images,
    texts: s.texts.map((t) => {
      const parsed = parseDirectives(t);
      Object.assign(directives, parsed.directives);
      return parsed.text;
    }),
  }));
  return { model, subjects: stripped, directives };
}

function subjectsOf(input: unknown): ModerationSubject[] {
  const invalid = () => new SimError(400, 'input must be a string, an array of strings, or an array of text and image_url parts', 'input');
  if (typeof input === 'string') return [{ texts: [input], images: [] }];
  if (!Array.isArray(input) || input.length === 0) throw invalid();
  if (input.every((i) => typeof i === 'string')) return input.map((text: string) => ({ texts: [text], images: [] }));
  const subject: ModerationSubject = { texts: [], images: [] };
  for (const part of input) {
    if (isRecord(part) && part.type === 'text' && typeof part.text === 'string') subject.texts.push(part.text);
    else if (isRecord(part) && part.type === 'image_url' && isRecord(part.image_url) && typeof part.image_url.url === 'string') {
      subject.images.push(part.image_url.url);
    } else throw invalid();
  }
  return [subject];
}

const triggered = (text: string, word: string) => new RegExp(`(^|[^\\p{L}\\p{N}])${word}(s|ed|ing)?($|[^\\p{L}\\p{N}])`, 'iu').test(text);
const parentOf = (category: ModerationCategory) => category.split('/')[0] as ModerationCategory;

export function moderate(subject: ModerationSubject): ModerationResult {
  const seed = createHash('sha256').update(JSON.stringify(subject)).digest();
  const typesOf = (category: ModerationCategory): InputType[] => [
    ...(subject.texts.length ? (['text'] as const) : []),
    ...(subject.images.length && IMAGE_CATEGORIES.has(category) ? (['image'] as const) : []),
  ];
  const scores = {} as Record<ModerationCategory, number>;
  const applied = {} as Record<ModerationCategory, InputType[]>;
  for (const [i, category] of MODERATION_CATEGORIES.entries()) {
    applied[category] = typesOf(category);
    const judged = [...(applied[category].includes('text') ? subject.texts : []), ...(applied[category].includes('image') ? subject.images : [])];
    const hit = judged.some((t) => triggered(t, MODERATION_TRIGGERS[category]));
    scores[category] = hit ? FLAGGED_SCORE : seed.readUInt16BE(i * 2) / 65536 / 100;
  }
  for (const category of MODERATION_CATEGORIES) {
    const parent = parentOf(category);
    scores[parent] = Math.max(scores[parent], scores[category]);
  }
  const categories = Object.fromEntries(MODERATION_CATEGORIES.map((c) => [c, scores[c] >= THRESHOLD])) as Record<ModerationCategory, boolean>;
  return {
    flagged: Object.values(categories).some(Boolean),
    categories,
    category_scores: scores,
    category_applied_input_types: applied,
  };
}

export function moderationResponse(request: ModerationRequest, id: string) {
  return { id, model: request.model, results: request.directives.empty ? [] : request.subjects.map(moderate) };
}
