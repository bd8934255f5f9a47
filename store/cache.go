package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketCache holds small values that flyd can rebuild but would rather
// not wait for, such as the tool lists of upstream MCP servers. A lost
// or damaged value costs a slower answer, never a wrong one.
var bucketCache = []byte("cache")

// MaxCacheValue bounds one cached value.
const MaxCacheValue = 4 << 20

// PutCache stores val under key and returns once it is on disk.
func (db *DB) PutCache(key string, val []byte) error {
	if len(val) > MaxCacheValue {
		return fmt.Errorf("put cache %s: %d bytes is over %d", key, len(val), MaxCacheValue)
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketCache)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), val)
	})
	if err != nil {
		return fmt.Errorf("put cache %s: %w", key, err)
	}
	return nil
}

// GetCache returns a copy of the value under key, or ErrNotFound.
func (db *DB) GetCache(key string) ([]byte, error) {
	var out []byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCache)
		if b == nil {
			return ErrNotFound
		}
		v := b.Get([]byte(key))
		if v == nil {
			return ErrNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}
