#!/bin/sh
# Installs fly (flyd and flyctl) for the current user on Linux or macOS:
#
#   curl -fsSL https://github.com/fly-dev/fly/releases/latest/download/install.sh | sh
#
# It downloads fly_<os>_<arch>.tar.gz and checksums.txt from the release,
# checks the archive's SHA-256, and puts flyd and flyctl side by side in
# the install directory. It changes no shell profile, and installs over no
# program that is not fly's: fly.io's CLI is also called flyctl, and the
# two can live side by side (this script says which one your PATH finds).
#
# Environment:
#   FLY_INSTALL_DIR       where flyd and flyctl go (default: ~/.local/bin)
#   FLY_VERSION           a release, e.g. 1.2.3 (default: the latest)
#   FLY_INSTALL_BASE_URL  where the release's files are (default: the
#                         latest GitHub release, or FLY_VERSION's)
#   FLY_INSTALL_FORCE=1   replace a flyd or flyctl in FLY_INSTALL_DIR that
#                         is not fly's
#
# The checksum guards against a damaged or truncated download; to check
# that the release is fly's own, verify checksums.txt's signature with
# cosign (see the release notes).

set -eu

say() { printf 'fly: %s\n' "$*"; }
warn() { printf 'fly: %s\n' "$*" >&2; }
die() {
	printf 'fly: error: %s\n' "$*" >&2
	exit 1
}

# is_fly FILE NAME: whether FILE is fly's flyd or flyctl. A program that
# does not hold fly's module path is not run at all; one that does is asked
# its version ("flyctl version --json" says "product": "fly"; older fly
# builds print "flyctl 1.2.3 (protocol 1)").
is_fly() {
	[ -f "$1" ] || return 1
	LC_ALL=C grep -q 'github.com/fly-dev/fly' "$1" 2>/dev/null || return 1
	[ -x "$1" ] || return 1
	if [ "$2" = flyctl ] && "$1" version --json 2>/dev/null | grep -q '"product": *"fly"'; then
		return 0
	fi
	"$1" version 2>/dev/null | grep -q "^$2 [^ ]* (.*protocol [0-9][0-9]*)\$"
}

download() { # URL FILE
	if command -v curl >/dev/null 2>&1; then
		case $1 in
		https://*) curl -fsSL --proto '=https' --tlsv1.2 --retry 2 -o "$2" "$1" ;;
		*) curl -fsSL --retry 2 -o "$2" "$1" ;; # a loopback test server (checked in main)
		esac
	elif command -v wget >/dev/null 2>&1; then
		case $1 in
		https://*) wget -q --https-only -O "$2" "$1" ;;
		*) wget -q -O "$2" "$1" ;;
		esac
	else
		die "neither curl nor wget is installed"
	fi
}

sha256() { # FILE
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d ' ' -f 1
	elif command -v shasum >/dev/null 2>&1; then
		shasum -a 256 "$1" | cut -d ' ' -f 1
	elif command -v openssl >/dev/null 2>&1; then
		openssl dgst -sha256 "$1" | sed 's/^.*= *//'
	else
		die "found no sha256sum, shasum or openssl to check the download with"
	fi
}

# on_path DIR: whether DIR is an entry of PATH.
on_path() {
	case ":$PATH:" in
	*":$1:"*) return 0 ;;
	esac
	return 1
}

# first_on_path NAME: the first NAME on PATH, as the shell would run it.
first_on_path() {
	old_ifs=$IFS
	IFS=:
	for d in $PATH; do
		[ -n "$d" ] || continue # an empty entry is the current directory: never run what is there
		if [ -f "$d/$1" ] && [ -x "$d/$1" ]; then
			IFS=$old_ifs
			printf '%s\n' "$d/$1"
			return 0
		fi
	done
	IFS=$old_ifs
	return 1
}

# rivals: every flyctl on PATH that is not fly's, one per line.
rivals() {
	old_ifs=$IFS
	IFS=:
	for d in $PATH; do
		case $d in /*) ;; *) continue ;; esac # only absolute entries: never run ./flyctl
		f=$d/flyctl
		if [ -f "$f" ] && [ -x "$f" ] && ! is_fly "$f" flyctl; then
			printf '%s\n' "$f"
		fi
	done
	IFS=$old_ifs
}

main() {
	case $(uname -s) in
	Linux) os=linux ;;
	Darwin) os=darwin ;;
	MINGW* | MSYS* | CYGWIN* | Windows*)
		die "on Windows, use install.ps1: irm https://github.com/fly-dev/fly/releases/latest/download/install.ps1 | iex"
		;;
	*) die "fly has no build for $(uname -s)" ;;
	esac
	case $(uname -m) in
	x86_64 | amd64) arch=amd64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) die "fly has no build for $(uname -m) on $os" ;;
	esac
	# A shell under Rosetta says x86_64 on an Apple silicon Mac.
	if [ "$os" = darwin ] && [ "$arch" = amd64 ] &&
		[ "$(sysctl -n sysctl.proc_translated 2>/dev/null || :)" = 1 ]; then
		arch=arm64
	fi

	if [ -n "${FLY_INSTALL_BASE_URL:-}" ]; then
		base=${FLY_INSTALL_BASE_URL%/}
		# The checksums come from the same place as the archive: only TLS,
		# or this machine itself (a test serving dist/), may be trusted.
		# A port is digits alone: http://localhost:1@example.com/ is not
		# this machine (install.ps1 has the same rule).
		case $base in
		*"
"*) die "FLY_INSTALL_BASE_URL holds a line break" ;;
		https://*) ;;
		*) printf '%s\n' "$base" | grep -Eq '^http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?(/|$)' ||
			die "FLY_INSTALL_BASE_URL must be https:// (or a server on this machine): $base" ;;
		esac
	elif [ -n "${FLY_VERSION:-}" ]; then
		base=https://github.com/fly-dev/fly/releases/download/v${FLY_VERSION#v}
	else
		base=https://github.com/fly-dev/fly/releases/latest/download
	fi
	if [ -n "${FLY_INSTALL_DIR:-}" ]; then
		dir=$FLY_INSTALL_DIR
	else
		[ -n "${HOME:-}" ] || die "HOME is not set; set FLY_INSTALL_DIR"
		dir=$HOME/.local/bin
	fi
	case $dir in
	/*) ;;
	*) dir=$(pwd)/$dir ;;
	esac
	dir=${dir%/}
	if [ "$(id -u)" = 0 ] && [ -n "${SUDO_USER:-}" ]; then
		warn "installing for root under sudo; fly runs as each user, so you probably want to run this as yourself"
	fi

	# Refuse before downloading anything if the install would replace a
	# program that is not fly's.
	for name in flyd flyctl; do
		if [ -e "$dir/$name" ] && ! is_fly "$dir/$name" "$name"; then
			if [ "${FLY_INSTALL_FORCE:-}" = 1 ]; then
				warn "replacing $dir/$name, which is not fly's (FLY_INSTALL_FORCE=1)"
			else
				die "$dir/$name is not fly's $name (another program has that name; fly.io's CLI is also called flyctl). Nothing was changed. Install elsewhere with FLY_INSTALL_DIR=/some/dir, or replace it with FLY_INSTALL_FORCE=1"
			fi
		fi
	done

	archive=fly_${os}_${arch}.tar.gz
	tmp=$(mktemp -d 2>/dev/null || mktemp -d -t fly-install)
	trap 'rm -rf "$tmp"' EXIT
	trap 'exit 1' HUP INT TERM
	say "downloading $base/$archive"
	download "$base/checksums.txt" "$tmp/checksums.txt" || die "could not download $base/checksums.txt"
	download "$base/$archive" "$tmp/$archive" || die "could not download $base/$archive"
	want=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/checksums.txt")
	[ -n "$want" ] || die "checksums.txt lists no $archive"
	got=$(sha256 "$tmp/$archive")
	if [ "$got" != "$want" ]; then
		die "$archive has SHA-256 $got, but checksums.txt says $want: the download is damaged or was tampered with. Nothing was installed"
	fi
	mkdir "$tmp/x"
	tar -xzf "$tmp/$archive" -C "$tmp/x" flyd flyctl || die "could not unpack flyd and flyctl from $archive"
	version=$("$tmp/x/flyctl" version 2>/dev/null) || die "the downloaded flyctl does not run on this $os/$arch machine"

	mkdir -p "$dir" || die "could not create $dir"
	old=
	if [ -x "$dir/flyd" ] && is_fly "$dir/flyd" flyd; then
		old=$("$dir/flyd" version 2>/dev/null || :)
	fi
	# Each binary is written next to its place and renamed over it, so a
	# running flyd keeps its file and nothing is ever half written.
	# The temporary name is made by mktemp (O_EXCL): a link planted at a
	# predictable name in a shared directory is never written through.
	for name in flyd flyctl; do
		new=$(mktemp "$dir/.$name.new.XXXXXX") || die "could not write in $dir"
		if ! { cat "$tmp/x/$name" >"$new" &&
			chmod 755 "$new" &&
			mv -f "$new" "$dir/$name"; }; then
			rm -f "$new"
			die "could not install $dir/$name"
		fi
	done
	say "installed $version"
	say "  $dir/flyd"
	say "  $dir/flyctl"
	if [ -n "$old" ] && [ "$old" != "$("$dir/flyd" version 2>/dev/null || :)" ]; then
		say "this replaced $old; a flyd already running stays that version until it restarts"
		say "(flyctl service restart, for the service flyctl service install set up)"
	fi

	flyctl=flyctl
	first=$(first_on_path flyctl || :)
	if ! on_path "$dir"; then
		flyctl=$dir/flyctl
		echo
		say "$dir is not on your PATH. To add it, put this line in your shell's profile"
		say "(~/.profile, ~/.bashrc or ~/.zshrc) and open a new terminal:"
		say "  export PATH=\"$dir:\$PATH\""
	elif [ "$first" != "$dir/flyctl" ]; then
		flyctl=$dir/flyctl
	fi

	rival=$(rivals | head -n 1)
	if [ -n "$rival" ]; then
		echo
		say "another program named flyctl is on your PATH: $rival"
		say "(probably fly.io's CLI). It is left as it was, and both can be used:"
		if [ "$first" = "$rival" ]; then
			say "  'flyctl' runs that one, since it comes first on your PATH;"
			say "  run fly's as $dir/flyctl"
		else
			say "  'flyctl' runs fly's, since $dir comes first on your PATH;"
			say "  run the other as $rival (fly.io's CLI is also installed as 'fly')"
		fi
		say "Editors and agents run fly's by its full path, $dir/flyctl,"
		say "whichever comes first."
	fi

	echo
	say "Next, connect your editors and agents to fly:"
	say "  $flyctl setup"
}

main "$@"
