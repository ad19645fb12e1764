import { healChoices, healJson, wantsJson } from './response-healing';

describe('response healing (spec 4.2 rule 8)', () => {
  it('completes JSON cut short, as the simulator sends it', () => {
    const healed = healJson('{"answer": "hi", "items": [1, 2,');
    expect(JSON.parse(healed)).toEqual({ answer: 'hi', items: [1, 2] });
  });

  it('repairs trailing commas and single quotes', () => {
    expect(JSON.parse(healJson("{'a': 1, 'b': [true,],}"))).toEqual({ a: 1, b: [true] });
  });

  it('leaves valid JSON byte for byte', () => {
    const valid = '{ "a" : 1 }';
    expect(healJson(valid)).toBe(valid);
  });

  it('leaves text it cannot repair as it was', () => {
    const broken = '{"a": 1}} trailing }}';
    expect(healJson(broken)).toBe(broken);
  });

  it('heals every choice with string content, and counts them', () => {
    const completion = {
      id: 'x',
      choices: [
        { index: 0, message: { role: 'assistant', content: '[1, 2' } },
        { index: 1, message: { role: 'assistant', content: null, tool_calls: [] } },
        { index: 2, message: { role: 'assistant', content: '{}' } },
      ],
    };
    const { completion: healed, healed: count } = healChoices(completion);
    expect(count).toBe(1);
    expect(healed.choices).toEqual([{ index: 0, message: { role: 'assistant', content: '[1, 2]' } }, completion.choices[1], completion.choices[2]]);
    expect(completion.choices[0].message.content).toBe('[1, 2');
  });

  it.each([
    [{ type: 'json_object' }, true],
    [{ type: 'json_schema', json_schema: { name: 'x' } }, true],
    [{ type: 'text' }, false],
    [undefined, false],
    ['json_object', false],
  ])('wantsJson(%j) is %s', (format, expected) => {
    expect(wantsJson(format)).toBe(expected);
  });
});
