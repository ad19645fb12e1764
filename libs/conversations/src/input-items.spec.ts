import type { ResponseItem } from '@svc/interfaces';
import { errorOf } from '@svc/platform/testing/errors';
import { listInputItems } from './input-items';

const items: ResponseItem[] = Array.from({ length: 25 }, (_, i) => ({
  type: 'message',
  id: `msg_${i}`,
  status: 'completed',
  role: 'user',
  content: [{ type: 'input_text', text: `item ${i}` }],
}));
const ids = (list: { data: ResponseItem[] }) => list.data.map((i) => i.id);

describe('listInputItems', () => {
  it('gives the newest 20 first by default, with the list fields', () => {
    const list = listInputItems(items, {});
    expect(ids(list)).toEqual(
      items
        .slice(5)
        .reverse()
        .map((i) => i.id),
    );
    expect(list).toMatchObject({ object: 'list', first_id: 'msg_24', last_id: 'msg_5', has_more: true });
  });

  it('pages forwards with after, in either order', () => {
    const asc = listInputItems(items, { order: 'asc', limit: '10' });
    expect(asc).toMatchObject({ first_id: 'msg_0', last_id: 'msg_9', has_more: true });
    const next = listInputItems(items, { order: 'asc', limit: '10', after: 'msg_9' });
    expect(ids(next)).toEqual(items.slice(10, 20).map((i) => i.id));
    const last = listInputItems(items, { order: 'asc', limit: '10', after: 'msg_19' });
    expect(last).toMatchObject({ first_id: 'msg_20', last_id: 'msg_24', has_more: false });
    expect(listInputItems(items, { order: 'asc', after: 'msg_24' })).toEqual({ object: 'list', data: [], first_id: null, last_id: null, has_more: false });

    const desc = listInputItems(items, { limit: '3', after: 'msg_20' });
    expect(ids(desc)).toEqual(['msg_19', 'msg_18', 'msg_17']);
  });

  it('has_more is false when the page ends exactly at the last item', () => {
    expect(listInputItems(items, { limit: '25' }).has_more).toBe(false);
    expect(listInputItems(items, { limit: '5', after: 'msg_5' })).toMatchObject({ has_more: false, last_id: 'msg_0' });
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['limit 0', { limit: '0' }, 'limit'],
    ['limit 101', { limit: '101' }, 'limit'],
    ['a fractional limit', { limit: '2.5' }, 'limit'],
    ['a word for limit', { limit: 'ten' }, 'limit'],
    ['an unknown order', { order: 'newest' }, 'order'],
    ['an after that is no item of the response', { after: 'msg_x' }, 'after'],
    ['a repeated after', { after: ['msg_1', 'msg_2'] }, 'after'],
  ])('refuses %s with a 400 naming the parameter', (_, query, param) => {
    const error = errorOf(() => listInputItems(items, query));
    expect({ status: error.status, param: error.param }).toEqual({ status: 400, param });
  });
});
