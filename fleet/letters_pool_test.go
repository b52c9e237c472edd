package fleet

import "github.com/jackc/pgx/v5/pgxpool"

// insertPool is the pool a Letters inserts on.
func (s *Letters) insertPool() *pgxpool.Pool { return s.own }
