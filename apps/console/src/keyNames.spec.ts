import { keyNames, keyRef } from './keyNames';

describe('key names', () => {
  const names = keyNames([
    { id: 'key_a', name: 'mobile app' },
    { id: 'key_b', name: null },
    { id: 'key_c', name: '' },
  ]);

  it('reads a key:<id> reference as the workspace key of that id, by its name', () => {
    expect(keyRef('key:key_a', names)).toEqual({ id: 'key_a', name: 'mobile app' });
  });

  it('leaves a key without a name, or of another workspace, to its id', () => {
    expect(keyRef('key:key_b', names)).toEqual({ id: 'key_b', name: null });
    expect(keyRef('key:key_c', names)).toEqual({ id: 'key_c', name: null });
    expect(keyRef('key:key_other', names)).toEqual({ id: 'key_other', name: null });
  });

  it('is no key for the operator, the CLI or nothing', () => {
    expect(keyRef('admin', names)).toBeNull();
    expect(keyRef('cli', names)).toBeNull();
    expect(keyRef(null, names)).toBeNull();
  });
});
