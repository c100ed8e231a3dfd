package ledger

import (
	"database/sql"
	"fmt"
	"net/url"
)

// OpenReadOnly opens an existing ledger for reading only, beside an apply that may be writing it: no migration,
// no write, no lock (the apply's flock on the state directory is never taken), and a busy timeout so that a read
// waits out a write's commit instead of failing. In WAL mode readers never block the writer.
func OpenReadOnly(path string) (*Ledger, error) {
	q := url.Values{}
	q.Add("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	l := &Ledger{db: db, path: path}
	var version int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		db.Close()
		return nil, fmt.Errorf("ledger %s: read schema version: %w", path, err)
	}
	switch {
	case version == 0:
		db.Close()
		return nil, fmt.Errorf("ledger %s holds no runs yet (no schema): nothing was applied with this state directory", path)
	case version > len(migrations):
		db.Close()
		return nil, fmt.Errorf("ledger %s has schema version %d, newer than this kewplan understands (%d); use a newer kewplan", path, version, len(migrations))
	}
	return l, nil
}
