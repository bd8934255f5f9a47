// Package layout holds no code: its test enforces the shape of the
// repository that docs/STYLE.md describes. Every package has a doc comment, and
// each imports only what its row of the dependency table allows, so that
// the arrows point downward (daemon over its parts, flyctl over the wire,
// never the reverse) and the shim stays tiny.
package layout
