package fleet

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TrailTable is the name a TrailSource gives as the place of its records.
const TrailTable = "grantretry_trail"

// TrailSource is the fleet's trail as the source of a write-once shipper
// or verifier (the worm module's Source): one stream per writer, named
// by its writer id, with the writer's records in seq order as the table
// holds them. It meets worm.Source by its method set, which uses only
// built-in types, so the fleet does not depend on the worm module or the
// AWS SDK. A writer id is a stream name if it has only letters, digits,
// '.', '_' and '-' (the default ids do); the shipper leaves out any other.
// A TrailSource is safe for concurrent use.
type TrailSource struct {
	pool *pgxpool.Pool
}

// NewTrailSource returns the TrailSource of the trail in pool's database.
func NewTrailSource(pool *pgxpool.Pool) *TrailSource { return &TrailSource{pool: pool} }

// scanBatch is how many records one query of Scan reads.
const scanBatch = 1000

// Streams returns the writer ids that have records.
func (s *TrailSource) Streams(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT writer FROM grantretry_trail ORDER BY writer`)
	if err != nil {
		return nil, queryError(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			return nil, queryError(err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, queryError(err)
	}
	return out, nil
}

// Scan calls fn with each record of writer stream after seq after, in seq
// order, a batch at a time; the place it gives is TrailTable and line 0.
func (s *TrailSource) Scan(ctx context.Context, stream string, after uint64, fn func(record []byte, file string, line int) error) error {
	for {
		rows, err := s.pool.Query(ctx,
			`SELECT seq, record FROM grantretry_trail WHERE writer = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
			stream, int64(after), scanBatch)
		if err != nil {
			return queryError(err)
		}
		n := 0
		for rows.Next() {
			var seq int64
			var rec []byte
			if err := rows.Scan(&seq, &rec); err != nil {
				rows.Close()
				return queryError(err)
			}
			n++
			after = uint64(seq)
			if err := fn(rec, TrailTable, 0); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return queryError(err)
		}
		if n < scanBatch {
			return nil
		}
	}
}
