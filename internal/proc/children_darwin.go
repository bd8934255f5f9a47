package proc

import "fmt"

func subreaper() error { return fmt.Errorf("child subreaper: %w (macOS has none)", ErrUnsupported) }

func children(zombies bool) []int { return nil }

func withEnv(kv string) []int { return nil }
