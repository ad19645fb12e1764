import { NOTIFY_CHANNEL, noticePayload } from './notify';

// `tx` orders global reads, so it must keep growing: a logical copy (pg_dump/restore) into
// another cluster must first move that cluster's transaction counter past max(tx)
// (pg_resetwal -e/-x), or new events would sort before, and hide behind, the copied ones.
export const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS events (
  stream     text        NOT NULL,
  revision   bigint      NOT NULL,
  id         uuid        NOT NULL,
  seq        bigserial   NOT NULL,
  tx         xid8        NOT NULL DEFAULT pg_current_xact_id(),
  type       text        NOT NULL,
  data       jsonb       NOT NULL,
  metadata   jsonb       NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (stream, revision),
  UNIQUE (stream, id)
)`,
  `CREATE INDEX IF NOT EXISTS events_tx_seq ON events (tx, seq)`,
  // A cache of a stream's folded state (issue 45), never the truth: dropping every row costs
  // the next reader of each stream a whole read, nothing else. json, not jsonb: kept as written,
  // its objects' keys in their order, and not taken apart on the way in.
  `CREATE TABLE IF NOT EXISTS stream_snapshots (
  stream     text        PRIMARY KEY,
  revision   bigint      NOT NULL,
  event_id   uuid        NOT NULL,
  version    text        NOT NULL,
  state      json        NOT NULL,
  written_at timestamptz NOT NULL DEFAULT now()
)`,
  // Appends in one round trip and one transaction, one or many streams (group commit: the
  // appends that queue while others are on their way share a commit and its WAL flush). Every
  // stream's lock is taken FIRST, before anything of the group is written, in one order for
  // every group so that two groups never wait on each other in a cycle. Then each append keeps
  // its own rules (see appendGroup), as if alone. Each statement of a plpgsql function takes a
  // fresh snapshot under READ COMMITTED, so the revision read after the lock sees the append
  // that held it, and an append later in a group sees those before it in the same group.
  //
  // An append refused because its exact expected revision is behind gets, in `newer`, the events
  // written since (at most p_newer of them): the writer folds them into its state and decides
  // again at once, without a read of its own nor a turn under the lock across round trips. This
  // is the three-argument overload; the two-argument one of earlier releases stays untouched for
  // their processes during a rolling upgrade (its result columns cannot change under them).
  `CREATE OR REPLACE FUNCTION eventstore_append_group(p_appends text, p_notify boolean, p_newer integer)
  RETURNS TABLE (xid_assigned boolean, isolation text, revision text, tx text, seq text, existing jsonb, appended boolean, newer jsonb)
  LANGUAGE plpgsql AS $fn$
DECLARE
  v_lock bigint;
  v_append jsonb;
  v_stream text;
  v_expected text;
  v_current bigint;
  v_written boolean := false;
  -- Parsed once: the group's text is read by both loops below.
  v_appends jsonb := p_appends::jsonb;
BEGIN
  FOR v_lock IN
    SELECT DISTINCT hashtextextended(a.value->>'stream', 0) FROM jsonb_array_elements(v_appends) AS a(value) ORDER BY 1
  LOOP
    PERFORM pg_advisory_xact_lock(v_lock);
  END LOOP;
  xid_assigned := pg_current_xact_id_if_assigned() IS NOT NULL;
  isolation := current_setting('transaction_isolation');
  appended := false;
  IF xid_assigned OR isolation <> 'read committed' THEN
    RETURN NEXT;
    RETURN;
  END IF;
  FOR v_append IN SELECT a.value FROM jsonb_array_elements(v_appends) WITH ORDINALITY AS a(value, ord) ORDER BY a.ord LOOP
    v_stream := v_append->>'stream';
    v_expected := v_append->>'expected';
    revision := NULL;
    tx := NULL;
    seq := NULL;
    appended := false;
    newer := NULL;
    SELECT e.revision::text, e.tx::text, e.seq::text INTO revision, tx, seq
      FROM events e WHERE e.stream = v_stream ORDER BY e.revision DESC LIMIT 1;
    -- One (stream, id) lookup per id: the LIMIT keeps the planner from flattening the lateral
    -- subquery into a join, which it may plan as a scan of every event of the stream.
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'revision', e.revision::text, 'tx', e.tx::text, 'seq', e.seq::text)
                              ORDER BY e.revision), '[]')
      INTO existing
      FROM jsonb_array_elements_text(v_append->'ids') AS i(id)
      CROSS JOIN LATERAL (SELECT ev.id, ev.revision, ev.tx, ev.seq FROM events ev WHERE ev.stream = v_stream AND ev.id = i.id::uuid LIMIT 1) e;
    v_current := coalesce(revision::bigint, -1);
    IF jsonb_array_length(existing) = 0 AND jsonb_array_length(v_append->'events') > 0
       AND (v_expected = 'any'
            OR (v_expected = 'no_stream' AND v_current = -1)
            OR (v_expected = 'stream_exists' AND v_current >= 0)
            OR (v_expected ~ '^-?[0-9]+$' AND v_expected::bigint = v_current)) THEN
      WITH inserted AS (
        INSERT INTO events (stream, revision, id, type, data, metadata)
        SELECT v_stream, v_current + e.ordinality, (e.value->>'id')::uuid, e.value->>'type', e.value->'data', e.value->'metadata'
          FROM jsonb_array_elements(v_append->'events') WITH ORDINALITY AS e(value, ordinality)
        RETURNING events.revision, events.tx, events.seq)
      SELECT i.revision::text, i.tx::text, i.seq::text INTO revision, tx, seq
        FROM inserted i ORDER BY i.revision DESC LIMIT 1;
      appended := true;
      v_written := true;
    ELSIF jsonb_array_length(existing) = 0 AND v_expected ~ '^-?[0-9]+$' AND v_expected::bigint < v_current
          AND v_current - v_expected::bigint <= p_newer THEN
      SELECT jsonb_agg(jsonb_build_object('stream', e.stream, 'revision', e.revision::text, 'id', e.id::text, 'type', e.type,
                                          'data', e.data, 'metadata', e.metadata, 'tx', e.tx::text, 'seq', e.seq::text) ORDER BY e.revision)
        INTO newer
        FROM events e WHERE e.stream = v_stream AND e.revision > v_expected::bigint;
    END IF;
    RETURN NEXT;
  END LOOP;
  IF p_notify AND v_written THEN
    PERFORM pg_notify('${NOTIFY_CHANNEL}', ${noticePayload('appended')});
  END IF;
END
$fn$`,
];
