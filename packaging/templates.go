// Package packaging holds the service files that run flyd at login: a
// systemd user unit template and a launchd agent template. They are real
// files in this folder, for packagers to read and fill in (see README.md),
// and are embedded here so that "flyctl service install" fills in the very
// same text.
//
// A template has placeholders of the form @NAME@. One alone on its line is
// a block: it becomes zero or more lines at that indentation. Filling them
// in, and quoting for each format, is the job of cmd/flyctl; this package
// holds no logic.
package packaging

import _ "embed"

// SystemdUnit is systemd/flyd.service.in, the systemd user unit. Its
// placeholders: @FLYD@, the flyd binary quoted for ExecStart=; @ENVIRONMENT@,
// a block of Environment="NAME=value" lines.
//
//go:embed systemd/flyd.service.in
var SystemdUnit string

// LaunchdPlist is launchd/dev.fly.flyd.plist.in, the launchd agent. Its
// placeholders: @FLYD@, the flyd binary; @LOG@, the file that flyd's
// stdout and stderr go to; @ENVIRONMENT@, a block of <key>NAME</key>
// <string>value</string> lines. Values are XML-escaped.
//
//go:embed launchd/dev.fly.flyd.plist.in
var LaunchdPlist string
