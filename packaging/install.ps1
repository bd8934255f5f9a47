# Installs fly (flyd.exe and flyctl.exe) for the current user on Windows,
# in Windows PowerShell 5.1 or PowerShell 7:
#
#   irm https://github.com/fly-dev/fly/releases/latest/download/install.ps1 | iex
#
# It does what install.sh does on Linux and macOS: downloads
# fly_windows_<arch>.zip and checksums.txt from the release, checks the
# archive's SHA-256, and puts flyd.exe and flyctl.exe side by side in the
# install directory. It changes no PATH, and installs over no program that
# is not fly's: fly.io's CLI is also called flyctl.exe, and the two can
# live side by side (this script says which one your PATH finds).
#
# Environment:
#   FLY_INSTALL_DIR       where the binaries go (default: %LOCALAPPDATA%\fly\bin)
#   FLY_VERSION           a release, e.g. 1.2.3 (default: the latest)
#   FLY_INSTALL_BASE_URL  where the release's files are
#   FLY_INSTALL_FORCE=1   replace a flyd.exe or flyctl.exe in FLY_INSTALL_DIR
#                         that is not fly's

& {
    Set-StrictMode -Version 2
    $ErrorActionPreference = 'Stop'
    $ProgressPreference = 'SilentlyContinue' # Invoke-WebRequest is slow with it

    function Say([string]$msg) { Write-Host "fly: $msg" }
    function Fail([string]$msg) { throw "fly: error: $msg" }

    # Whether $path is fly's $name: a program without fly's module path is
    # not run at all; one with it is asked its version.
    function Test-Fly([string]$path, [string]$name) {
        # A native program's stderr must not stop the script here.
        $ErrorActionPreference = 'Continue'
        if (-not (Test-Path -LiteralPath $path -PathType Leaf)) { return $false }
        $text = [Text.Encoding]::ASCII.GetString([IO.File]::ReadAllBytes($path))
        if (-not $text.Contains('github.com/fly-dev/fly')) { return $false }
        try {
            if ($name -eq 'flyctl') {
                $json = (& $path version --json 2>$null) -join "`n"
                if ($json -match '"product":\s*"fly"') { return $true }
            }
            $line = (& $path version 2>$null) -join "`n"
            return ($line -match "^$name \S+ \(.*protocol \d+\)$")
        } catch {
            return $false
        }
    }

    try {
        [Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12
    } catch {}

    $arch = $null
    try {
        $arch = [Runtime.InteropServices.RuntimeInformation]::OSArchitecture.ToString()
    } catch {
        $arch = $env:PROCESSOR_ARCHITEW6432
        if (-not $arch) { $arch = $env:PROCESSOR_ARCHITECTURE }
    }
    switch ($arch) {
        { $_ -in 'X64', 'AMD64' } { $arch = 'amd64'; break }
        'Arm64' { $arch = 'arm64'; break }
        default { Fail "fly has no Windows build for $arch" }
    }

    if ($env:FLY_INSTALL_BASE_URL) {
        $base = $env:FLY_INSTALL_BASE_URL.TrimEnd('/')
        # The checksums come from the same place as the archive: only TLS,
        # or this machine itself (a test serving dist/), may be trusted.
        if ($base -notmatch '^(https://|http://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/|$))') {
            Fail "FLY_INSTALL_BASE_URL must be https:// (or a server on this machine): $base"
        }
    } elseif ($env:FLY_VERSION) {
        $base = 'https://github.com/fly-dev/fly/releases/download/v' + $env:FLY_VERSION.TrimStart('v')
    } else {
        $base = 'https://github.com/fly-dev/fly/releases/latest/download'
    }
    if ($env:FLY_INSTALL_DIR) {
        $dir = $env:FLY_INSTALL_DIR
    } else {
        $dir = Join-Path $env:LOCALAPPDATA 'fly\bin'
    }
    $dir = [IO.Path]::GetFullPath($dir).TrimEnd('\')

    # Refuse before downloading anything if the install would replace a
    # program that is not fly's.
    foreach ($name in 'flyd', 'flyctl') {
        $path = Join-Path $dir "$name.exe"
        if ((Test-Path -LiteralPath $path) -and -not (Test-Fly $path $name)) {
            if ($env:FLY_INSTALL_FORCE -eq '1') {
                Say "replacing $path, which is not fly's (FLY_INSTALL_FORCE=1)"
            } else {
                Fail "$path is not fly's $name (another program has that name; fly.io's CLI is also called flyctl). Nothing was changed. Install elsewhere with `$env:FLY_INSTALL_DIR, or replace it with `$env:FLY_INSTALL_FORCE='1'"
            }
        }
    }

    $archive = "fly_windows_$arch.zip"
    $tmp = Join-Path ([IO.Path]::GetTempPath()) ('fly-install-' + [Guid]::NewGuid())
    New-Item -ItemType Directory -Path $tmp | Out-Null
    try {
        Say "downloading $base/$archive"
        Invoke-WebRequest -UseBasicParsing -Uri "$base/checksums.txt" -OutFile (Join-Path $tmp 'checksums.txt')
        Invoke-WebRequest -UseBasicParsing -Uri "$base/$archive" -OutFile (Join-Path $tmp $archive)
        $want = $null
        foreach ($line in Get-Content (Join-Path $tmp 'checksums.txt')) {
            $f = $line -split '\s+'
            if ($f.Count -ge 2 -and ($f[1] -eq $archive -or $f[1] -eq "*$archive")) { $want = $f[0].ToLower(); break }
        }
        if (-not $want) { Fail "checksums.txt lists no $archive" }
        $got = (Get-FileHash -Algorithm SHA256 -LiteralPath (Join-Path $tmp $archive)).Hash.ToLower()
        if ($got -ne $want) {
            Fail "$archive has SHA-256 $got, but checksums.txt says ${want}: the download is damaged or was tampered with. Nothing was installed"
        }
        $x = Join-Path $tmp 'x'
        Expand-Archive -LiteralPath (Join-Path $tmp $archive) -DestinationPath $x
        foreach ($name in 'flyd', 'flyctl') {
            if (-not (Test-Path -LiteralPath (Join-Path $x "$name.exe"))) { Fail "$archive holds no $name.exe" }
        }
        $version = $null
        try { $version = (& (Join-Path $x 'flyctl.exe') version) -join '' } catch {}
        if (-not $version -or $LASTEXITCODE -ne 0) { Fail "the downloaded flyctl.exe does not run on this machine" }

        New-Item -ItemType Directory -Force -Path $dir | Out-Null
        $old = $null
        if (Test-Fly (Join-Path $dir 'flyd.exe') 'flyd') { # never run a program that is not fly's
            $ErrorActionPreference = 'Continue'
            try { $old = (& (Join-Path $dir 'flyd.exe') version 2>$null) -join '' } catch {}
            $ErrorActionPreference = 'Stop'
        }
        # A running .exe cannot be overwritten but can be renamed: the old
        # one steps aside, and is deleted now or by the next install.
        foreach ($name in 'flyd', 'flyctl') {
            $dest = Join-Path $dir "$name.exe"
            $aside = Join-Path $dir "$name.exe.old"
            Remove-Item -LiteralPath $aside -Force -ErrorAction SilentlyContinue
            if (Test-Path -LiteralPath $dest) { Move-Item -LiteralPath $dest -Destination $aside -Force }
            Copy-Item -LiteralPath (Join-Path $x "$name.exe") -Destination $dest
            Remove-Item -LiteralPath $aside -Force -ErrorAction SilentlyContinue
        }
    } finally {
        Remove-Item -LiteralPath $tmp -Recurse -Force -ErrorAction SilentlyContinue
    }

    Say "installed $version"
    Say "  $dir\flyd.exe"
    Say "  $dir\flyctl.exe"
    if ($old) {
        $new = (& (Join-Path $dir 'flyd.exe') version) -join ''
        if ($old -ne $new) {
            Say "this replaced $old; a flyd already running stays that version until it restarts"
            Say "(flyctl service restart)"
        }
    }

    $flyctl = 'flyctl'
    $onPath = @($env:Path -split ';' | ForEach-Object { $_.TrimEnd('\') }) -contains $dir
    $found = @(Get-Command flyctl -CommandType Application -All -ErrorAction SilentlyContinue)
    $first = $null
    if ($found.Count -gt 0) { $first = $found[0].Path }
    if (-not $onPath) {
        $flyctl = "$dir\flyctl.exe"
        Write-Host ''
        Say "$dir is not on your PATH. To add it for your user, run this and open a new terminal:"
        Say "  [Environment]::SetEnvironmentVariable('Path', '$dir;' + [Environment]::GetEnvironmentVariable('Path', 'User'), 'User')"
    } elseif ($first -ne "$dir\flyctl.exe") {
        $flyctl = "$dir\flyctl.exe"
    }

    $rival = $found | Where-Object { -not (Test-Fly $_.Path 'flyctl') } | Select-Object -First 1
    if ($rival) {
        Write-Host ''
        Say "another program named flyctl is on your PATH: $($rival.Path)"
        Say "(probably fly.io's CLI). It is left as it was, and both can be used:"
        if ($first -eq $rival.Path) {
            Say "  'flyctl' runs that one, since it comes first on your PATH;"
            Say "  run fly's as $dir\flyctl.exe"
        } else {
            Say "  'flyctl' runs fly's, since $dir comes first on your PATH;"
            Say "  run the other as $($rival.Path) (fly.io's CLI is also installed as 'fly')"
        }
        Say "Editors and agents run fly's by its full path, $dir\flyctl.exe,"
        Say 'whichever comes first.'
    }

    Write-Host ''
    Say 'Next, connect your editors and agents to fly:'
    if ($flyctl -eq 'flyctl') { Say '  flyctl setup' } else { Say "  & '$flyctl' setup" }
}
