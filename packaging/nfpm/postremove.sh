#!/bin/sh
# fly-flutter: after the package's files are removed (deb postrm, rpm
# %postun). On removal, not on upgrade: every running user manager
# reloads, so that it forgets the unit file that is gone. This never fails
# the removal.

set -e

case "$1" in
remove | purge | 0) ;; # deb: remove, purge; rpm: 0 packages left after erase
*) exit 0 ;;
esac
command -v systemctl >/dev/null 2>&1 || exit 0

users=$(systemctl list-units 'user@*.service' --no-legend --plain 2>/dev/null |
	sed -n 's/^[^u]*user@\([0-9][0-9]*\)\.service.*/\1/p')
for uid in $users; do
	systemctl --user -M "$uid@" daemon-reload >/dev/null 2>&1 || : &
done
wait
exit 0
