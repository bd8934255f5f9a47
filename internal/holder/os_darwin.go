package holder

// adopt: macOS has no subreaper; what the run orphans goes to launchd,
// and only the run's process group is signalled there.
func adopt() error { return nil }
