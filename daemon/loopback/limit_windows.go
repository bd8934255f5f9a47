package loopback

// fileLimit: Windows has no per-process descriptor limit of this kind (a
// process's handle table holds millions), so the cap is connCap's most.
func fileLimit() int { return 16384 }
