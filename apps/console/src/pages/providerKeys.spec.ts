import { providerKeyBody, providerRows } from './providerKeys';

describe('provider keys', () => {
  it('lists every provider of the catalog, saved or not, and a saved key whose provider left it', () => {
    const rows = providerRows({
      providers: ['openai', 'anthropic', 'sim'],
      data: [
        { provider: 'sim', hint: '...wxyz', saved_at: '2026-03-01T00:00:00.000Z' },
        { provider: 'gone', hint: '...abcd', saved_at: '2026-02-01T00:00:00.000Z' },
      ],
    });
    expect(rows.map((r) => [r.provider, r.saved?.hint ?? null, r.inCatalog])).toEqual([
      ['anthropic', null, true],
      ['gone', '...abcd', false],
      ['openai', null, true],
      ['sim', '...wxyz', true],
    ]);
  });

  it('trims a pasted key and says what is missing on the field it concerns', () => {
    expect(providerKeyBody('sim', '  sk-test-1234567890abcdef\n')).toEqual({ body: { api_key: 'sk-test-1234567890abcdef' } });
    const empty = providerKeyBody('sim', ' \n');
    expect('problem' in empty && [empty.problem.param, empty.problem.message]).toEqual(['api_key', 'Paste the API key your sim account gave you.']);
    const noProvider = providerKeyBody('', 'sk-x');
    expect('problem' in noProvider && noProvider.problem.param).toBe('provider');
  });

  it('leaves a space inside the key for the API to refuse', () => {
    expect(providerKeyBody('sim', 'sk one')).toEqual({ body: { api_key: 'sk one' } });
  });
});
