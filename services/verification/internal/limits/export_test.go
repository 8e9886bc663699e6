package limits

// Buckets is the number of buckets kept, for tests.
func Buckets(c *ClientRate) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buckets)
}
