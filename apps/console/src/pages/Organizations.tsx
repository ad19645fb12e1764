import { useEffect, useRef, useState, type FormEvent } from 'react';
import { api, type Session } from '../api';
import { when } from '../format';
import type { OrgMember, Organization } from '../records';
import { useStepUp } from '../stepup';
import { Card, ConfirmButton, ErrorText, FieldError, FormError, isAbout, LoadState, Notice, Page, Table, useAction, useHash, useLoad } from '../ui';
import { deletesOrg, managesMembers, memberActions, memberBody, ROLE_WORDS, type MemberRole } from './organizations';
import './Organizations.css';

const orgPath = (id: string) => `/organizations/${encodeURIComponent(id)}`;
const orgHash = (id: string) => `#/organizations/${encodeURIComponent(id)}`;

/** The organization a `#/organizations/<id>` hash names. */
function orgIdOf(hash: string): string | null {
  const [, id] = hash.replace(/^#\/?/, '').split('/');
  return id ? decodeURIComponent(id) : null;
}

export function Organizations({ session }: { session: Session }) {
  const selectedId = useHash(orgIdOf);
  const orgs = useLoad(() => api<{ data: Organization[] }>('GET', '/organizations').then((r) => r.data), []);
  const [notice, setNotice] = useState<string | null>(null);
  const selected = orgs.data?.find((o) => o.id === selectedId) ?? null;

  /** Back to the list after the organization is gone for this account (deleted, or left). */
  const gone = (message: string) => {
    setNotice(message);
    location.hash = '#/organizations';
    orgs.reload();
  };

  return (
    <Page
      title="Organizations"
      intro="Organizations this account owns or belongs to. Keys created inside one bill its owner; its owner and admins manage its people."
    >
      <Notice>{notice}</Notice>
      <Card title="Your organizations">
        <LoadState loaded={orgs} what="organizations" empty="This account is in no organization yet. Create one below.">
          {(data) => <OrgsTable orgs={data} selectedId={selectedId} />}
        </LoadState>
      </Card>
      {selected ? (
        <OrgDetail
          key={selected.id}
          org={selected}
          accountId={session.accountId}
          onDeleted={() => gone(`Deleted ${selected.name}. Its keys no longer work.`)}
          onLeft={() => gone(`You left ${selected.name}. The keys you created in it no longer work.`)}
        />
      ) : (
        selectedId &&
        orgs.data &&
        // Not while the list reloads: a just-created organization is not in the old one.
        !orgs.loading && (
          <Card title="Organization not found">
            <p className="error" role="alert">
              This account is in no organization with id {selectedId}.
            </p>
            <a href="#/organizations">Back to the list</a>
          </Card>
        )
      )}
      <Card title="New organization">
        <CreateOrgForm
          onCreated={(org) => {
            setNotice(`Created ${org.name}. You are its owner: its keys bill this account.`);
            orgs.reload();
            location.hash = orgHash(org.id);
          }}
        />
      </Card>
    </Page>
  );
}

function RoleBadge({ role }: { role: Organization['role'] }) {
  return <span className={`badge ${role === 'owner' ? 'ok' : role === 'admin' ? 'warn' : ''}`}>{role}</span>;
}

function OrgsTable({ orgs, selectedId }: { orgs: Organization[]; selectedId: string | null }) {
  return (
    <div className="org-table">
      <Table label="Organizations">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Id</th>
            <th scope="col">Your role</th>
            <th scope="col">Created</th>
            <th scope="col">
              <span className="sr-only">Members</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {orgs.map((org) => (
            <tr key={org.id} className={org.id === selectedId ? 'org-selected' : undefined}>
              <th scope="row">{org.name}</th>
              <td className="mono nowrap">{org.id}</td>
              <td>
                <RoleBadge role={org.role} />
              </td>
              <td className="nowrap">{when(org.created_at)}</td>
              <td className="nowrap">
                <a href={orgHash(org.id)} aria-label={`Members of ${org.name}`} aria-current={org.id === selectedId ? 'true' : undefined}>
                  Members
                </a>
              </td>
            </tr>
          ))}
        </tbody>
      </Table>
    </div>
  );
}

function CreateOrgForm({ onCreated }: { onCreated: (org: Organization) => void }) {
  const [name, setName] = useState('');
  const { busy, error, run } = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const trimmed = name.trim();
    const created = await run(() => api<{ data: Organization }>('POST', '/organizations', { body: trimmed ? { name: trimmed } : {} }));
    if (!created) return;
    setName('');
    onCreated(created.data);
  };
  const invalid = isAbout(error, 'name');
  return (
    <form onSubmit={submit} noValidate aria-label="New organization">
      <div className="inline">
        <div className="field">
          <label htmlFor="org-name">Name</label>
          <input
            id="org-name"
            value={name}
            maxLength={200}
            onChange={(e) => setName(e.target.value)}
            aria-invalid={invalid ? true : undefined}
            aria-describedby={invalid ? 'name-error' : 'org-name-hint'}
          />
          <p className="hint" id="org-name-hint">
            Optional: without a name, the organization is called by its id. You will be its owner.
          </p>
          <FieldError error={error} field="name" />
        </div>
      </div>
      <FormError error={error} fields={['name']} />
      <div className="form-actions">
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create organization'}
        </button>
      </div>
    </form>
  );
}

function OrgDetail({ org, accountId, onDeleted, onLeft }: { org: Organization; accountId: string | null; onDeleted: () => void; onLeft: () => void }) {
  const members = useLoad(() => api<{ data: OrgMember[] }>('GET', `${orgPath(org.id)}/members`).then((r) => r.data), [org.id]);
  const withStepUp = useStepUp();
  const [notice, setNotice] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);

  // Opening an organization moves focus to it, as following a link to a new page would.
  useEffect(() => heading.current?.focus(), []);

  const changed = (message: string) => {
    setNotice(message);
    members.reload();
  };

  return (
    <section className="card org-detail" aria-labelledby="org-detail-title">
      <div className="card-head">
        <h2 id="org-detail-title" tabIndex={-1} ref={heading}>
          {org.name} <RoleBadge role={org.role} />
        </h2>
        {deletesOrg(org.role) && (
          <ConfirmButton
            label="Delete organization"
            title={`Delete ${org.name}?`}
            confirmLabel="Delete organization"
            message={
              <>
                <p>Every key of the organization stops working at once, and its members lose access. This cannot be undone.</p>
                <p className="muted">When email step-up is on, a code mailed to you confirms it.</p>
              </>
            }
            onConfirm={async () => {
              await withStepUp('delete_organization', (headers) => api('DELETE', orgPath(org.id), { headers }));
              onDeleted();
            }}
          />
        )}
      </div>
      <p className="muted small">
        <span className="mono">{org.id}</span> · You are its {org.role}. {ROLE_WORDS[org.role]}
      </p>
      <Notice>{notice}</Notice>
      <h3>Members</h3>
      <LoadState loaded={members} what="members" empty="No members.">
        {(data) => (
          <div className="org-table">
            <Table label={`Members of ${org.name}`}>
              <thead>
                <tr>
                  <th scope="col">Account</th>
                  <th scope="col">Role</th>
                  <th scope="col">Added</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {data.map((member) => (
                  <MemberRow key={member.account_id} org={org} member={member} accountId={accountId} onChanged={changed} onLeft={onLeft} />
                ))}
              </tbody>
            </Table>
          </div>
        )}
      </LoadState>
      {managesMembers(org.role) && <AddMemberForm orgId={org.id} onAdded={(added) => changed(`Added ${added.account_id} as ${added.role}.`)} />}
    </section>
  );
}

function MemberRow({
  org,
  member,
  accountId,
  onChanged,
  onLeft,
}: {
  org: Organization;
  member: OrgMember;
  accountId: string | null;
  onChanged: (message: string) => void;
  onLeft: () => void;
}) {
  const actions = memberActions(org.role, accountId, member);
  const { busy, error, run } = useAction();
  const path = `${orgPath(org.id)}/members/${encodeURIComponent(member.account_id)}`;

  const changeRole = async (role: MemberRole) => {
    const done = await run(() => api('PATCH', path, { body: { role } }));
    if (done) onChanged(`${member.account_id} is now ${role === 'admin' ? 'an admin' : 'a member'}.`);
  };

  return (
    <tr>
      <th scope="row" className="mono nowrap">
        {member.account_id}
        {member.account_id === accountId && <span className="muted small org-you"> (you)</span>}
      </th>
      <td>
        <RoleBadge role={member.role} />
      </td>
      <td className="nowrap">{when(member.added_at)}</td>
      <td>
        <div className="member-actions">
          {actions.changeTo && (
            <button
              type="button"
              className="secondary"
              disabled={busy}
              onClick={() => changeRole(actions.changeTo!)}
              aria-label={`Make ${member.account_id} ${actions.changeTo === 'admin' ? 'an admin' : 'a member'}`}
            >
              {busy ? 'Changing…' : actions.changeTo === 'admin' ? 'Make admin' : 'Make member'}
            </button>
          )}
          {actions.remove && (
            <ConfirmButton
              label="Remove"
              title={`Remove ${member.account_id} from ${org.name}?`}
              confirmLabel="Remove member"
              message={<p>They lose access to the organization, and the keys they created in it stop working.</p>}
              onConfirm={async () => {
                await api('DELETE', path);
                onChanged(`Removed ${member.account_id}.`);
              }}
            />
          )}
          {actions.leave && (
            <ConfirmButton
              label="Leave"
              title={`Leave ${org.name}?`}
              confirmLabel="Leave organization"
              message={<p>You lose access to the organization, and the keys you created in it stop working. Only an owner or admin can add you again.</p>}
              onConfirm={async () => {
                await api('DELETE', path);
                onLeft();
              }}
            />
          )}
        </div>
        <ErrorText error={error} />
      </td>
    </tr>
  );
}

function AddMemberForm({ orgId, onAdded }: { orgId: string; onAdded: (added: { account_id: string; role: MemberRole }) => void }) {
  const [account, setAccount] = useState('');
  const [role, setRole] = useState<MemberRole>('member');
  const { busy, error, setError, run } = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const checked = memberBody(account, role);
    if ('problem' in checked) return setError(checked.problem);
    const added = await run(() => api('POST', `${orgPath(orgId)}/members`, { body: checked.body }));
    if (!added) return;
    setAccount('');
    onAdded(checked.body);
  };

  const accountInvalid = isAbout(error, 'account_id');
  const roleInvalid = isAbout(error, 'role');
  return (
    <form onSubmit={submit} noValidate aria-label="Add a member" className="add-member">
      <h3>Add a member</h3>
      <div className="inline">
        <div className="field">
          <label htmlFor="member-account-id">Account id</label>
          <input
            id="member-account-id"
            value={account}
            spellCheck={false}
            autoComplete="off"
            placeholder="acc_…"
            onChange={(e) => setAccount(e.target.value)}
            aria-invalid={accountInvalid ? true : undefined}
            aria-describedby={accountInvalid ? 'account_id-error' : 'member-account-id-hint'}
          />
          <p className="hint" id="member-account-id-hint">
            The id of their account on this gateway.
          </p>
          <FieldError error={error} field="account_id" />
        </div>
        <div className="field member-role">
          <label htmlFor="member-role">Role</label>
          <select
            id="member-role"
            value={role}
            onChange={(e) => setRole(e.target.value as MemberRole)}
            aria-invalid={roleInvalid ? true : undefined}
            aria-describedby={roleInvalid ? 'role-error' : 'member-role-hint'}
          >
            <option value="member">member</option>
            <option value="admin">admin</option>
          </select>
          <p className="hint" id="member-role-hint">
            {ROLE_WORDS[role]}
          </p>
          <FieldError error={error} field="role" />
        </div>
      </div>
      <FormError error={error} fields={['account_id', 'role']} />
      <div className="form-actions">
        <button type="submit" disabled={busy}>
          {busy ? 'Adding…' : 'Add member'}
        </button>
      </div>
    </form>
  );
}
