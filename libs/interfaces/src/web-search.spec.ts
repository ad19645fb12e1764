import { countTextTokens } from '@svc/providers';
import { chatAnnotations, lastUserText, WEB_RESULT_TOKENS, webSearchMessage, webSearchPromptTokens, type WebSearchRun, withWebSearch } from './web-search';

const run: WebSearchRun = {
  id: 'abc',
  query: 'q',
  engine: 'sim/searxng',
  hits: [
    { title: 'One', url: 'https://one.example/a', snippet: 's1', content: 'first page', date: '2026-11-01' },
    { title: 'Two', url: 'https://two.example/b', snippet: 's2', content: 'word '.repeat(2000), date: null },
  ],
};

describe('spec 4.2 rule 7: the web search inside a generation', () => {
  it('searches the text of the last user message, its text parts joined', () => {
    expect(
      lastUserText([
        { role: 'user', content: 'old' },
        { role: 'assistant', content: 'a' },
        { role: 'user', content: [{ type: 'text', text: 'new' }, { type: 'image_url' }, { type: 'text', text: 'more' }] },
      ]),
    ).toBe('new\nmore');
    expect(lastUserText([{ role: 'system', content: 'only a system prompt' }])).toBe('');
  });

  it('gives the results just before the last user message, dated by the clock, each page cut to WEB_RESULT_TOKENS', () => {
    const message = webSearchMessage(run, new Date('2026-11-25T10:00:00Z'));
    expect(message.content).toMatch(/^A web search was conducted on 2026-11-25\./);
    expect(message.content).toContain('[1] One\nURL: https://one.example/a\nPublished: 2026-11-01\nfirst page');
    expect(message.content).toContain('[2] Two\nURL: https://two.example/b\nword');
    expect(countTextTokens(message.content)).toBeLessThan(webSearchPromptTokens(2));
    expect(countTextTokens(message.content)).toBeLessThan(60 + 2 * WEB_RESULT_TOKENS);
    const messages = withWebSearch([{ role: 'system' }, { role: 'user' }, { role: 'assistant' }, { role: 'user' }], { role: 'search' });
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'search', 'user']);
    expect(webSearchMessage(run, new Date(), 'Use these:').content.startsWith('Use these:\n\n[1] One')).toBe(true);
  });

  it('cites every result; the span is the markdown link that cites it, else its bare URL, else 0 and 0', () => {
    const text = 'See [one.example](https://one.example/a) for more.';
    expect(chatAnnotations(text, run)).toEqual([
      { type: 'url_citation', url_citation: { url: 'https://one.example/a', title: 'One', content: 'first page', start_index: 4, end_index: 40 } },
      { type: 'url_citation', url_citation: { url: 'https://two.example/b', title: 'Two', content: run.hits[1].content, start_index: 0, end_index: 0 } },
    ]);
    expect(text.slice(4, 40)).toBe('[one.example](https://one.example/a)');
    const bare = chatAnnotations('at https://two.example/b', run)[1].url_citation;
    expect([bare.start_index, bare.end_index]).toEqual([3, 24]);
  });
});
