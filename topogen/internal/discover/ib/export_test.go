package ib

// SetChunkSize makes Parse read n bytes at a time until the returned
// function restores the size.
func SetChunkSize(n int) (restore func()) {
	old := chunkSize
	chunkSize = n
	return func() { chunkSize = old }
}
