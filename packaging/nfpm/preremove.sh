#!/bin/sh
# fly-flutter: before the package's files are removed (deb prerm, rpm
# %preun). On removal, not on upgrade: disable flyd.service for everyone
# (undoing an admin's "systemctl --global enable flyd") and, in every
# running user manager whose flyd.service is this package's unit, stop and
# disable it, as systemd's own packaging does for user units
# (systemd-update-helper remove-user-units; Debian's deb-systemd-invoke
# --user talks to user managers the same way). The unit stops flyd alone
# (KillMode=process: runs outlive a restart of flyd), so the package's
# removal first sends SIGTERM to every process of the unit, the runs'
# holders among them, which stop their runs. "flyctl setup" and "flyctl service install" enable this
# unit for a user when flyd is this package's, so this stops the
# package's flyd of every user logged in or lingering, and leaves them no
# unit. A user's own unit (which flyctl
# writes to ~/.config/systemd/user/flyd.service for a flyd of their own,
# say in ~/.local/bin) is left alone, running or not. "-M uid@" reaches a
# user manager through that user's D-Bus (dbus-user-session, which
# libpam-systemd recommends); without it this reaches none. This never
# fails the removal.

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
			systemctl --user -M "$uid@" kill --kill-whom=all flyd.service >/dev/null 2>&1 || :
			systemctl --user -M "$uid@" disable --now flyd.service >/dev/null 2>&1 || :
		fi
	) &
done
wait
exit 0
