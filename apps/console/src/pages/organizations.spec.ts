import type { OrgMember } from '../records';
import { deletesOrg, managesMembers, memberActions, memberBody } from './organizations';

const member = (account_id: string, role: OrgMember['role']): OrgMember => ({ account_id, role, added_at: '2026-03-01T00:00:00.000Z' });

describe('organization permissions', () => {
  it('lets owners and admins manage people, and only the owner delete', () => {
    expect([managesMembers('owner'), managesMembers('admin'), managesMembers('member')]).toEqual([true, true, false]);
    expect([deletesOrg('owner'), deletesOrg('admin'), deletesOrg('member')]).toEqual([true, false, false]);
  });

  it('never offers to change or remove the owner, not even to the owner', () => {
    expect(memberActions('owner', 'acc_owner', member('acc_owner', 'owner'))).toEqual({ changeTo: null, remove: false, leave: false });
    expect(memberActions('admin', 'acc_admin', member('acc_owner', 'owner'))).toEqual({ changeTo: null, remove: false, leave: false });
  });

  it('offers the other role and removal to owners and admins, nothing to members', () => {
    expect(memberActions('owner', 'acc_owner', member('acc_b', 'member'))).toEqual({ changeTo: 'admin', remove: true, leave: false });
    expect(memberActions('admin', 'acc_a', member('acc_b', 'admin'))).toEqual({ changeTo: 'member', remove: true, leave: false });
    expect(memberActions('member', 'acc_c', member('acc_b', 'member'))).toEqual({ changeTo: null, remove: false, leave: false });
  });

  it('lets anyone but the owner leave, from their own row only', () => {
    expect(memberActions('member', 'acc_c', member('acc_c', 'member'))).toEqual({ changeTo: null, remove: false, leave: true });
    expect(memberActions('admin', 'acc_a', member('acc_a', 'admin'))).toEqual({ changeTo: null, remove: false, leave: true });
    // A key without a known creator is nobody's own row.
    expect(memberActions('member', null, member('acc_c', 'member')).leave).toBe(false);
  });

  it('trims the account id and asks for one when it is empty', () => {
    expect(memberBody(' acc_1 ', 'admin')).toEqual({ body: { account_id: 'acc_1', role: 'admin' } });
    const empty = memberBody('  ', 'member');
    expect('problem' in empty && empty.problem.param).toBe('account_id');
  });
});
