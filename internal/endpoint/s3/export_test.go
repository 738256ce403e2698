package s3

// SetCopyLimits makes the single-copy limit and the copy part size small
// so tests reach the multipart-copy path without 5 GiB objects. It returns
// a function that restores them; tests using it must not run in parallel.
func SetCopyLimits(single, part int64) (restore func()) {
	s, p := maxSingleCopy, copyPartSize
	maxSingleCopy, copyPartSize = single, part
	return func() { maxSingleCopy, copyPartSize = s, p }
}
