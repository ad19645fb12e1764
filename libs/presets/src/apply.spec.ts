import { DomainError } from '@svc/platform';
import { applyPreset, findPreset, presetReference, type StoredPreset } from './apply';

const preset: StoredPreset = {
  version: 3,
  config: {
    model: 'sim/echo',
    models: ['sim/claude-echo'],
    system_prompt: 'Be brief.',
    params: { temperature: 0.2, max_tokens: 50 },
    provider: { sort: 'price', allow_fallbacks: true },
    tools: [
      { type: 'function', function: { name: 'lookup', description: 'preset' } },
      { type: 'function', function: { name: 'weather' } },
    ],
    plugins: [{ id: 'response-healing' }],
  },
};
const user = [{ role: 'user', content: 'hi' }];

describe('presets in requests (spec 2.5, 4.2)', () => {
  it('finds the reference in all three forms', () => {
    expect(presetReference({ model: '@preset/support' })).toEqual({ slug: 'support', model: null, param: 'model' });
    expect(presetReference({ model: 'sim/echo@preset/support' })).toEqual({ slug: 'support', model: 'sim/echo', param: 'model' });
    expect(presetReference({ model: 'sim/echo', preset: 'support' })).toEqual({ slug: 'support', model: 'sim/echo', param: 'preset' });
    expect(presetReference({ model: 'sim/echo' })).toBeNull();
  });

  it('an unknown slug is 404 preset_not_found naming the field', () => {
    const err = (() => {
      try {
        findPreset({ slug: 'nope', model: null, param: 'preset' }, new Map());
      } catch (e) {
        return e as DomainError;
      }
    })();
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ kind: 'not_found', code: 'preset_not_found', param: 'preset' });
  });

  it("applies the preset's model, fallbacks, system prompt, params, provider, tools and plugins", () => {
    const out = applyPreset({ model: '@preset/support', messages: user }, presetReference({ model: '@preset/support' })!, preset);
    expect(out).toEqual({
      model: 'sim/echo',
      models: ['sim/claude-echo'],
      messages: [{ role: 'system', content: 'Be brief.' }, ...user],
      temperature: 0.2,
      max_tokens: 50,
      provider: { sort: 'price', allow_fallbacks: true },
      tools: preset.config.tools,
      plugins: [{ id: 'response-healing' }],
    });
  });

  it('request fields beat the preset; tools and plugins merge, the request winning a name both use', () => {
    const body = {
      model: 'sim/claude-echo@preset/support',
      messages: user,
      temperature: 0.9,
      models: [],
      provider: { sort: 'latency' },
      tools: [
        { type: 'function', function: { name: 'lookup', description: 'mine' } },
        { type: 'function', function: { name: 'extra' } },
      ],
      plugins: [{ id: 'context-compression' }],
      preset: undefined,
    };
    const out = applyPreset(body, presetReference(body)!, preset);
    expect(out.model).toBe('sim/claude-echo');
    expect(out.temperature).toBe(0.9);
    expect((out as Record<string, unknown>).max_tokens).toBe(50);
    expect(out.models).toEqual([]);
    expect(out.provider).toEqual({ sort: 'latency', allow_fallbacks: true });
    expect((out.tools as { function: { name: string; description?: string } }[]).map((t) => [t.function.name, t.function.description])).toEqual([
      ['lookup', 'mine'],
      ['weather', undefined],
      ['extra', undefined],
    ]);
    expect(out.plugins).toEqual([{ id: 'response-healing' }, { id: 'context-compression' }]);
    expect('preset' in out).toBe(false);
  });

  it('a preset without a model needs one from the request', () => {
    expect(() => applyPreset({ model: '@preset/x', messages: user }, { slug: 'x', model: null, param: 'model' }, { version: 1, config: {} })).toThrow(
      /names no model/,
    );
  });
});
