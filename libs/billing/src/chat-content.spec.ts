import { chatPromptTexts, withChatPromptTexts } from './chat-content';

// Issue 44: what the content filters read of a chat request, and the request rebuilt around what they send on.
describe('the prompt texts of a chat request', () => {
  const messages = [
    { role: 'system', content: 'be brief' },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'first' },
        { type: 'image_url', image_url: { url: 'data:,' } },
        { type: 'text', text: 'second' },
      ],
    },
    { role: 'assistant', content: null },
    { role: 'tool', content: 'tool output' },
  ];

  it('are every string content and text part, in order; images and empty contents are not text', () => {
    expect(chatPromptTexts(messages)).toEqual(['be brief', 'first', 'second', 'tool output']);
  });

  it('put back in the same places, everything else untouched', () => {
    const rebuilt = withChatPromptTexts(messages, ['A', 'B', 'C', 'D']);
    expect(rebuilt).toEqual([
      { role: 'system', content: 'A' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'B' },
          { type: 'image_url', image_url: { url: 'data:,' } },
          { type: 'text', text: 'C' },
        ],
      },
      { role: 'assistant', content: null },
      { role: 'tool', content: 'D' },
    ]);
    expect(chatPromptTexts(rebuilt)).toEqual(['A', 'B', 'C', 'D']);
  });
});
