// Package dtd finds the Flutter apps that run outside fly, started by an
// IDE or a terminal: every Dart Tooling Daemon writes a small file per
// process (the reference's §4.1) that says where it listens and which
// workspace it serves, and lists the apps registered with it
// (ConnectedApp, §4.4). A Watcher follows the directory of those files
// (fsnotify, plus a rescan), reads each one hostile-first (a regular
// file of this user, not a symlink, bounded, a loopback URI, a live
// process), connects to the DTDs of served workspaces and keeps the apps
// they list, each under a stable id.
package dtd
