#!/bin/sh
# fly-flutter: after the package's files are in place (deb postinst, rpm
# %post). The unit is enabled for nobody: each user chooses to run flyd at
# login ("flyctl setup" or "flyctl service install", which enable this
# unit, or "systemctl --user enable --now flyd"). Every running user
# manager reloads, so that it sees the new or changed unit file; on an
# upgrade, a flyd running from this package's unit restarts to be the new
# version (the editors' "flyctl mcp" reconnect by themselves). A user's
# own unit is left alone. This never fails the installation.

set -e

unit=/usr/lib/systemd/user/flyd.service

upgrade=
case "$1" in
configure) [ -n "$2" ] && upgrade=1 ;; # deb: $2 is the version upgraded from
1) ;;                                  # rpm: first install
2) upgrade=1 ;;                        # rpm: upgrade (2 versions installed)
*) exit 0 ;;
esac

if command -v systemctl >/dev/null 2>&1; then
	users=$(systemctl list-units 'user@*.service' --no-legend --plain 2>/dev/null |
		sed -n 's/^[^u]*user@\([0-9][0-9]*\)\.service.*/\1/p')
	for uid in $users; do
		(
			systemctl --user -M "$uid@" daemon-reload >/dev/null 2>&1 || :
			if [ -n "$upgrade" ]; then
				frag=$(systemctl --user -M "$uid@" show --property=FragmentPath --value flyd.service 2>/dev/null || :)
				if [ "$frag" = "$unit" ]; then
					systemctl --user -M "$uid@" try-restart flyd.service >/dev/null 2>&1 || :
				fi
			fi
		) &
	done
	wait
fi

if [ -z "$upgrade" ]; then
	echo "fly: each user who wants fly runs: flyctl setup"
	echo "fly: (it registers fly in their editors and agents, and runs flyd at login:"
	echo "fly:  systemctl --user enable --now flyd does the latter alone)"
fi
exit 0
