// Package apperrors turns what a running Flutter app reports of its
// framework errors into a short, deduplicated list that an agent can
// afford to read: the structured Flutter.Error events of the VM service
// (vm-service-protocol reference §2), and the text blocks flutter prints
// where structured errors are off (web) or an app logs them
// (══╡ EXCEPTION CAUGHT BY … ╞, "Another exception was thrown: …").
//
// It owns the parsing (library, summary, the error-causing widget and
// its workspace-relative location, the first stack frame inside the
// project) and the list: one entry per distinct error of a reload
// generation, counted, bounded in entries and bytes, paged newest first
// by cursor. It does not own the VM-service connection (daemon/vmservice)
// or the run the errors belong to (daemon/runs); it reads no files and
// starts no goroutines. A List may be used concurrently.
package apperrors
