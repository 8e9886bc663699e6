package groupcommit

// Queued is how many items wait in b's shards for a batch.
func Queued[T, R any](b *Batcher[T, R]) int {
	n := 0
	for _, s := range b.shards {
		s.mu.Lock()
		n += len(s.items)
		s.mu.Unlock()
	}
	return n
}

// ShardOf is the index of key's shard.
func ShardOf[T, R any](b *Batcher[T, R], key string) int { return b.shardOf(key) }

// CallsQueued is how many calls wait in c for a merged call.
func CallsQueued[T any](c *Calls[T]) int { return Queued(c.b) }

// Linger is how long a drain waits for more items before it ends.
const Linger = linger
