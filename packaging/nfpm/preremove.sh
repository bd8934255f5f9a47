#!/bin/sh
# fly-flutter: before the package's files are removed (deb prerm, rpm
# %preun). On removal, not on upgrade: disable flyd.service for everyone
# (undoing an admin's "systemctl --global enable flyd") and, in every
# running user manager whose flyd.service is this package's unit, stop and
# disable it, as systemd's own packaging does for user units
# (systemd-update-helper remove-user-units). flyd stops its flutter runs
# on the way out. A user's own unit ("flyctl service install" writes
# ~/.config/systemd/user/flyd.service) is left alone, running or not.
# This never fails the removal.

set -e

unit=/usr/lib/systemd/user/flyd.service

case "$1" in
remove | purge | 0) ;; # deb: remove; rpm: 0 packages left after erase
*) exit 0 ;;           # upgrade, failed-upgrade, deconfigure; rpm: 1
esac
command -v systemctl >/dev/null 2>&1 || exit 0

systemctl --global disable flyd.service >/dev/null 2>&1 || :

# The uids whose user manager runs (none without a running systemd).
users=$(systemctl list-units 'user@*.service' --no-legend --plain 2>/dev/null |
	sed -n 's/^[^u]*user@\([0-9][0-9]*\)\.service.*/\1/p')
for uid in $users; do
	(
		frag=$(systemctl --user -M "$uid@" show --property=FragmentPath --value flyd.service 2>/dev/null || :)
		if [ "$frag" = "$unit" ]; then
			systemctl --user -M "$uid@" disable --now flyd.service >/dev/null 2>&1 || :
		fi
	) &
done
wait
exit 0
