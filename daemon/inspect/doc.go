// Package inspect turns what a running app shows of itself into what an
// agent can afford to read: the inspector's widget tree as an indented
// summary of the project's widgets with their source locations, and the
// engine's screenshot scaled down within a byte budget. It does no I/O:
// the caller fetches the raw answers over the app's VM service.
package inspect
