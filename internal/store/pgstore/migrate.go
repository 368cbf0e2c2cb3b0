package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrationFiles are the schema's versions, NNNN_name.sql, applied in order.
// A released file is never edited: changes are new files.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string // with {s} for the quoted schema
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, path := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(path, "migrations/"), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("pgstore: bad migration file name %q", path)
		}
		body, err := migrationFiles.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(body)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgstore: migrations not numbered 1..n: %d at position %d", m.version, i+1)
		}
	}
	return out, nil
}

// advisoryClass is the first key of the migration lock; the second is a
// hash of the schema name, so deployments in other schemas do not wait.
const advisoryClass = 0x50617231 // "Par1"

// migrate applies the pending migrations in one transaction under a
// transaction-scoped advisory lock: nodes starting together queue on the
// lock, and the ones after the first find nothing to do. Being one
// transaction, a failed migration leaves the schema as it was.
func (s *Store) migrate(ctx context.Context, schema string) error {
	migs, err := loadMigrations()
	if err != nil {
		return permanentError{err}
	}
	qs := pgx.Identifier{schema}.Sanitize()
	var applied []migration
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", int32(advisoryClass), schema); err != nil {
			return err
		}
		// DDL only when something is missing: a pre-created schema needs
		// no CREATE on the database, and an up-to-date one opens on a
		// read-only standby too (Ping then reports it not ready).
		var hasSchema, hasTable bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
			to_regclass($2) IS NOT NULL`, schema, qs+".schema_migrations").Scan(&hasSchema, &hasTable); err != nil {
			return err
		}
		if !hasSchema {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+qs); err != nil {
				return err
			}
		}
		if !hasTable {
			if _, err := tx.Exec(ctx, "CREATE TABLE "+qs+`.schema_migrations (
				version    integer PRIMARY KEY,
				name       text NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return err
			}
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+qs+".schema_migrations").Scan(&current); err != nil {
			return err
		}
		if current > len(migs) {
			return permanentError{fmt.Errorf("pgstore: schema %s is at version %d, newer than this build's %d: upgrade this node", schema, current, len(migs))}
		}
		for _, m := range migs[current:] {
			if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{s}", qs)); err != nil {
				return fmt.Errorf("pgstore: migration %d (%s): %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+qs+".schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return err
			}
			applied = append(applied, m)
		}
		return nil
	})
	if err != nil {
		return mapErr("migrate", err)
	}
	for _, m := range applied {
		s.log.Info("pgstore: migration applied", "schema", schema, "version", m.version, "name", m.name)
	}
	return nil
}
