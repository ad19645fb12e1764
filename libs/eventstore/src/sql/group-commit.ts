import type { SqlRunner } from '@svc/platform';
import { storeUnavailable } from '../common';
import type { AppendResult, ExpectedRevision, NewEvent } from '../port';
import type { PreparedAppend, SqlAppender } from './append';

/**
 * One: every append that comes while a group is on its way goes in the next. With two, the
 * first append after each dispatch took the free place alone, so half the groups were a single
 * append with a NOTIFY transaction of its own; measured in one run against two (bench
 * `--ab-only`), one group gave 1.10x the requests/s at 64 connections and 1.06x at 4, 13% less
 * CPU per request, and no worse p99. A lone append on a quiet process still goes at once.
 */
export const DEFAULT_GROUPS_IN_FLIGHT = 1;
/** Bounds of one group: a statement of a few MB at most, whatever the appends weigh. */
const MAX_GROUP_APPENDS = 256;
const MAX_GROUP_CHARS = 4 * 1024 * 1024;

interface QueuedAppend extends PreparedAppend {
  resolve(result: AppendResult): void;
  reject(err: unknown): void;
}

/**
 * Group commit: an append is sent at once while fewer than `maxGroupsInFlight` groups are on
 * their way; otherwise it waits for one of them to return and goes with every append that
 * queued meanwhile, of any stream, in one statement and one transaction (one commit, one WAL
 * flush). A quiet process pays no wait; a busy one pays a commit per group, not per append.
 *
 * `committed(notified)` is called once a group that wrote something has committed, before its
 * appends are settled; `notified` says whether the group's own transaction sent the NOTIFY.
 */
export class GroupCommit {
  private readonly queued: QueuedAppend[] = [];
  private groupsInFlight = 0;

  constructor(
    private readonly runner: SqlRunner,
    private readonly appender: SqlAppender,
    private readonly maxGroupsInFlight: number,
    private readonly committed: (notified: boolean) => void,
  ) {}

  append(stream: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      // Not spread: that would build the append's JSON, which only the group function reads.
      this.queued.push(Object.assign(this.appender.prepare(stream, events, expected), { resolve, reject }));
      this.sendGroups();
    });
  }

  private sendGroups(): void {
    while (this.groupsInFlight < this.maxGroupsInFlight && this.queued.length > 0) {
      let bytes = 0;
      let size = 0;
      while (size < this.queued.length && size < MAX_GROUP_APPENDS && (size === 0 || bytes + this.queued[size].chars <= MAX_GROUP_CHARS)) {
        bytes += this.queued[size].chars;
        size++;
      }
      const group = this.queued.splice(0, size);
      this.groupsInFlight++;
      void this.commitGroup(group).finally(() => {
        this.groupsInFlight--;
        this.sendGroups();
      });
    }
  }

  /**
   * Settles every append of the group; never throws. Appends of one event at an exact revision
   * or to a new stream go by one INSERT (SqlAppender.appendDirect); the group function answers
   * the rest, and those the INSERT did not write.
   */
  private async commitGroup(group: QueuedAppend[]): Promise<void> {
    let direct: Array<AppendResult | null> | null;
    try {
      direct = await this.appender.appendDirect(this.runner, group);
    } catch (err) {
      for (const append of group) append.reject(err);
      return;
    }
    const rest = direct ? group.filter((_, i) => direct[i] === null) : group;
    if (direct && rest.length < group.length) {
      // After its commit, off the group's latency: see notifyOthers.
      this.committed(false);
      group.forEach((append, i) => direct[i] && append.resolve(direct[i]));
    }
    if (rest.length > 0) await this.commitByFunction(rest);
  }

  /** Settles every append of the group through the group function; never throws. */
  private async commitByFunction(group: QueuedAppend[]): Promise<void> {
    let outcomes: Array<AppendResult | Error>;
    const notifies = group.length > 1 && this.runner.dialect === 'postgres';
    try {
      // One statement, its own transaction, when the server runs statements READ COMMITTED (the
      // default). Under REPEATABLE READ or SERIALIZABLE the snapshot would be taken before the
      // lock wait and miss the append that held it: the function refuses, and the group runs
      // again in a transaction set to READ COMMITTED. A lone append wakes the other processes
      // after its commit (notifyOthers), off its latency; a group of several (a busy process)
      // wakes them from its own transaction: a NOTIFY's serialised commit weighs little beside
      // a group's, and it saves the NOTIFY transaction that would follow nearly every group.
      outcomes =
        (await this.appender.appendGroup(this.runner, group, { requireReadCommitted: false, notify: notifies })) ??
        (await this.runner.transaction((tx) => this.appender.appendGroup(tx, group, { notify: notifies }), { readCommitted: true }))!;
    } catch (err) {
      if (group.length > 1 && !storeUnavailable(err)) {
        // One append the database refuses (a value it cannot take) must not fail the others:
        // each goes again alone, and only the guilty one fails. A store that cannot be reached
        // fails the group as one: alone, each would only wait for the same failure.
        for (const one of group) await this.commitGroup([one]);
        return;
      }
      for (const append of group) append.reject(err);
      return;
    }
    // An empty append (no ids) only checks its expectation: nothing to signal.
    if (group.some((a) => a.ids.length > 0)) this.committed(notifies);
    group.forEach((append, i) => {
      const outcome = outcomes[i];
      if (outcome instanceof Error) append.reject(outcome);
      else append.resolve(outcome);
    });
  }
}
