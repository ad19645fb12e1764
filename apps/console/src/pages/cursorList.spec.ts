import { appendPage, emptyCursor, replaceItem, withoutItem } from './cursorList';

interface Row {
  id: string;
  n: number;
}
const idOf = (r: Row) => r.id;
const page = (ids: string[], hasMore: boolean) => ({
  data: ids.map((id) => ({ id, n: 0 })),
  first_id: ids[0] ?? null,
  last_id: ids.at(-1) ?? null,
  has_more: hasMore,
});

describe('cursor lists', () => {
  it('appends pages and keeps the last id as the next cursor', () => {
    const one = appendPage(emptyCursor<Row>(), page(['c', 'b'], true), idOf);
    expect(one).toMatchObject({ after: 'b', hasMore: true });
    const two = appendPage(one, page(['a'], false), idOf);
    expect(two.items.map(idOf)).toEqual(['c', 'b', 'a']);
    expect(two).toMatchObject({ after: 'a', hasMore: false });
  });

  it('shows an item once when it reappears on the next page', () => {
    const one = appendPage(emptyCursor<Row>(), page(['c', 'b'], true), idOf);
    expect(appendPage(one, page(['b', 'a'], false), idOf).items.map(idOf)).toEqual(['c', 'b', 'a']);
  });

  it('keeps the cursor when a page comes back empty', () => {
    const one = appendPage(emptyCursor<Row>(), page(['b'], true), idOf);
    expect(appendPage(one, page([], false), idOf)).toMatchObject({ after: 'b', hasMore: false });
  });

  it('replaces an item by id in place, and removes one', () => {
    const rows = [
      { id: 'a', n: 1 },
      { id: 'b', n: 1 },
    ];
    expect(replaceItem(rows, { id: 'b', n: 2 }, idOf)).toEqual([
      { id: 'a', n: 1 },
      { id: 'b', n: 2 },
    ]);
    expect(replaceItem(rows, { id: 'z', n: 2 }, idOf)).toEqual(rows);
    expect(withoutItem({ items: rows, after: 'b', hasMore: true }, 'a', idOf)).toEqual({ items: [{ id: 'b', n: 1 }], after: 'b', hasMore: true });
  });
});
