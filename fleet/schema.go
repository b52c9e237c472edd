package fleet

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schema creates every table of the fleet; each statement is idempotent.
// The trail's table is append-only: a trigger refuses UPDATE, DELETE and
// TRUNCATE, whoever runs them (a superuser can still disable the trigger,
// which VerifyTrail then catches by the chain).
const schema = `
CREATE TABLE IF NOT EXISTS grantretry_letters (
	id             text PRIMARY KEY,
	created        timestamptz NOT NULL,
	letter         jsonb NOT NULL,
	state          text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'redelivered')),
	claimed_by     text,
	lease_until    timestamptz,
	claims         bigint NOT NULL DEFAULT 0,
	redelivered_at timestamptz,
	result         jsonb
);
CREATE INDEX IF NOT EXISTS grantretry_letters_waiting
	ON grantretry_letters (created, id) WHERE state = 'waiting';
-- When the claim holding a letter confirmed its fence and set out to send
-- it: set by the statement that confirms, cleared once the send's outcome
-- is known. A claim that finds it set takes over a letter whose send was
-- in flight when its lease ended, and marks the letter ambiguous.
ALTER TABLE grantretry_letters ADD COLUMN IF NOT EXISTS sending_since timestamptz;
-- When the funder said it will take the letter (its not_before), NULL when
-- it is due now: Claim leaves the letter until then.
ALTER TABLE grantretry_letters ADD COLUMN IF NOT EXISTS not_before timestamptz;
-- The submission's closing time (its due_by), NULL when it has none; and
-- whether the letter is late (its late): Claim leaves a late letter, or one
-- whose closing time has passed, unless the caller chose to send late.
ALTER TABLE grantretry_letters ADD COLUMN IF NOT EXISTS due_by timestamptz NULL;
ALTER TABLE grantretry_letters ADD COLUMN IF NOT EXISTS late boolean NOT NULL DEFAULT false;
-- A retired letter (Letters.Retire) leaves the waiting set for good: its
-- state is 'retired', and who retired it, when and why are kept beside it.
ALTER TABLE grantretry_letters ADD COLUMN IF NOT EXISTS retired_at timestamptz;
ALTER TABLE grantretry_letters ADD COLUMN IF NOT EXISTS retired_by text;
ALTER TABLE grantretry_letters ADD COLUMN IF NOT EXISTS retired_reason text;
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_constraint
			WHERE conrelid = 'grantretry_letters'::regclass AND conname = 'grantretry_letters_state_check'
			AND pg_get_constraintdef(oid) LIKE '%retired%') THEN
		ALTER TABLE grantretry_letters DROP CONSTRAINT IF EXISTS grantretry_letters_state_check;
		ALTER TABLE grantretry_letters ADD CONSTRAINT grantretry_letters_state_check
			CHECK (state IN ('waiting', 'redelivered', 'retired'));
	END IF;
END $$;

CREATE TABLE IF NOT EXISTS grantretry_trail (
	writer  text   NOT NULL,
	seq     bigint NOT NULL CHECK (seq > 0),
	record  text   NOT NULL,
	prev    text   NOT NULL,
	hash    text   NOT NULL,
	written timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (writer, seq)
);
CREATE OR REPLACE FUNCTION grantretry_trail_append_only() RETURNS trigger
	LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'grantretry_trail is append-only: % refused', TG_OP;
END $$;
DROP TRIGGER IF EXISTS grantretry_trail_append_only ON grantretry_trail;
CREATE TRIGGER grantretry_trail_append_only
	BEFORE UPDATE OR DELETE ON grantretry_trail
	FOR EACH ROW EXECUTE FUNCTION grantretry_trail_append_only();
DROP TRIGGER IF EXISTS grantretry_trail_no_truncate ON grantretry_trail;
CREATE TRIGGER grantretry_trail_no_truncate
	BEFORE TRUNCATE ON grantretry_trail
	FOR EACH STATEMENT EXECUTE FUNCTION grantretry_trail_append_only();

CREATE TABLE IF NOT EXISTS grantretry_hosts (
	host         text PRIMARY KEY,
	failures     bigint NOT NULL DEFAULT 0,
	open_until   timestamptz,
	opened_at    timestamptz,
	probe_until  timestamptz NOT NULL DEFAULT '-infinity',
	probe_wait   interval NOT NULL DEFAULT '0',
	tokens       double precision NOT NULL,
	max_tokens   double precision NOT NULL,
	refilled     timestamptz NOT NULL DEFAULT now(),
	version      bigint NOT NULL DEFAULT 0
);
ALTER TABLE grantretry_hosts ADD COLUMN IF NOT EXISTS failed_at timestamptz NOT NULL DEFAULT '-infinity';
-- The bucket's recent levels: after each of its last withdrawals, and
-- raised by the deposits credited since (see grantretry_level_at).
ALTER TABLE grantretry_hosts ADD COLUMN IF NOT EXISTS levels_at timestamptz[] NOT NULL DEFAULT '{}';
ALTER TABLE grantretry_hosts ADD COLUMN IF NOT EXISTS levels double precision[] NOT NULL DEFAULT '{}';
-- The refill period, in seconds, of the last withdrawal's policy: for the
-- sweep of the rows at rest (0: the default's).
ALTER TABLE grantretry_hosts ADD COLUMN IF NOT EXISTS refill_s double precision NOT NULL DEFAULT 0;
-- The host's quota hold: until when the fleet sends the host nothing
-- (NULL: not held), and whether that is the funder's time (quota_known)
-- or the next probe's turn (see quota.go).
ALTER TABLE grantretry_hosts ADD COLUMN IF NOT EXISTS quota_until timestamptz;
ALTER TABLE grantretry_hosts ADD COLUMN IF NOT EXISTS quota_known boolean NOT NULL DEFAULT false;

-- grantretry_level_at is the bucket's level at t as the row's recent
-- levels tell it: the newest at or before t; before them all, the oldest
-- one's level before its withdrawal; with none, a full bucket. (The times
-- are each withdrawal's transaction start, not always in the arrays'
-- order.)
CREATE OR REPLACE FUNCTION grantretry_level_at(ats timestamptz[], lvls double precision[], t timestamptz, full_at double precision)
	RETURNS double precision LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
	best timestamptz;
	lvl double precision;
	oldest timestamptz;
	oldlvl double precision;
BEGIN
	FOR i IN 1..coalesce(cardinality(ats), 0) LOOP
		IF ats[i] <= t AND (best IS NULL OR ats[i] > best) THEN
			best := ats[i];
			lvl := lvls[i];
		END IF;
		IF oldest IS NULL OR ats[i] < oldest THEN
			oldest := ats[i];
			oldlvl := lvls[i];
		END IF;
	END LOOP;
	IF best IS NOT NULL THEN
		RETURN lvl;
	ELSIF oldest IS NOT NULL THEN
		RETURN LEAST(full_at, oldlvl + 1);
	END IF;
	RETURN full_at;
END $$;

-- grantretry_credit raises the recent levels from the one a credit of c
-- at t was measured against (the newest at or before t, else all) by c,
-- each to at most full_at: a later deposit of successes from that time
-- on finds the deficit this one filled already filled.
CREATE OR REPLACE FUNCTION grantretry_credit(ats timestamptz[], lvls double precision[], t timestamptz, c double precision, full_at double precision)
	RETURNS double precision[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
	since timestamptz;
	raised double precision[] := lvls;
BEGIN
	IF c IS NULL OR c <= 0 THEN
		RETURN lvls;
	END IF;
	FOR i IN 1..coalesce(cardinality(ats), 0) LOOP
		IF ats[i] <= t AND (since IS NULL OR ats[i] > since) THEN
			since := ats[i];
		END IF;
	END LOOP;
	FOR i IN 1..coalesce(cardinality(ats), 0) LOOP
		IF since IS NULL OR ats[i] >= since THEN
			raised[i] := LEAST(full_at, lvls[i] + c);
		END IF;
	END LOOP;
	RETURN raised;
END $$;
`

// schemaLock is the advisory lock Migrate holds, so that processes
// starting together do not race to create the same tables.
const schemaLock = 0x6772616e74 // "grant"

// Migrate creates the fleet's tables, functions and triggers if they are
// missing. Run it once, as the role that owns them, before the processes
// start (or from each: it is idempotent and serialised by an advisory
// lock). The application role needs only SELECT and INSERT on
// grantretry_trail; see GrantStatements.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLock)); err != nil {
			return fmt.Errorf("grantretry: fleet: migrate: %w", err)
		}
		if _, err := tx.Exec(ctx, schema); err != nil {
			return fmt.Errorf("grantretry: fleet: migrate: %w", err)
		}
		return nil
	})
}

// GrantStatements returns the statements that give role what the fleet
// needs and no more: on the trail, SELECT and INSERT only, so that the
// application cannot rewrite what it recorded. role must be a plain SQL
// identifier; it is quoted.
func GrantStatements(role string) []string {
	r := pgx.Identifier{role}.Sanitize()
	return []string{
		"GRANT SELECT, INSERT ON grantretry_trail TO " + r,
		"REVOKE UPDATE, DELETE, TRUNCATE ON grantretry_trail FROM " + r,
		"GRANT SELECT, INSERT, UPDATE ON grantretry_letters TO " + r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON grantretry_hosts TO " + r,
	}
}

// dropSchema removes everything schema creates. Dropping a table drops
// its index and its triggers; the trigger function goes after them.
const dropSchema = `
DROP TABLE IF EXISTS grantretry_letters, grantretry_trail, grantretry_hosts;
DROP FUNCTION IF EXISTS grantretry_trail_append_only();
DROP FUNCTION IF EXISTS grantretry_level_at(timestamptz[], double precision[], timestamptz, double precision);
DROP FUNCTION IF EXISTS grantretry_credit(timestamptz[], double precision[], timestamptz, double precision, double precision);
`

// Drop removes what Migrate created, with everything in it: the waiting
// and the redelivered letters, every writer's audit trail and the hosts'
// shared breakers and budgets. It is the undo of Migrate, for a database
// that tried fleet mode out or no longer serves a fleet; stop the fleet's
// processes first (Drop waits for the locks their statements hold, as
// long as ctx lets it). It runs, in one transaction under Migrate's
// advisory lock, as the role that owns the tables:
//
//	DROP TABLE IF EXISTS grantretry_letters, grantretry_trail, grantretry_hosts;
//	DROP FUNCTION IF EXISTS grantretry_trail_append_only();
//	DROP FUNCTION IF EXISTS grantretry_level_at(timestamptz[], double precision[], timestamptz, double precision);
//	DROP FUNCTION IF EXISTS grantretry_credit(timestamptz[], double precision[], timestamptz, double precision, double precision);
//
// The trail's trigger refuses DELETE and TRUNCATE, not DROP TABLE: an
// audit trail that must be kept is kept by not running Drop, and by the
// application role's grants (GrantStatements gives it no DROP). On a
// database where Migrate never ran, Drop does nothing and returns nil.
func Drop(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLock)); err != nil {
			return fmt.Errorf("grantretry: fleet: drop: %w", err)
		}
		if _, err := tx.Exec(ctx, dropSchema); err != nil {
			return fmt.Errorf("grantretry: fleet: drop: %w", err)
		}
		return nil
	})
}
