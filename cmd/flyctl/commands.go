package main

import "strings"

// commands is flyctl's table of commands: each with its one-line
// summary, its synopsis, its flags and handler (the options type of its
// cmd function defines the flags) and its examples. Every help page is
// generated from it (command.page); what a command does is told by the
// constant its about names, beside its handler in the file of its noun.
func commands() *command {
	return (&command{
		name:  "flyctl",
		usage: "flyctl <command> [flags]",
		about: `flyctl talks to flyd, the per-user daemon that shares one workspace index,
one set of flutter runs and their logs between every MCP client.`,
		examples: `flyctl mcp --workspace ~/src/my_app
flyctl status --json`,
		badVerb: "unknown command %q",
		verbs: []*command{
			{
				name:    "mcp",
				summary: "relay an editor's MCP stdio stream to flyd (put this in the editor's MCP config)",
				usage:   "flyctl mcp [flags]",
				about:   mcpAbout,
				run:     handle(cmdMCP),
				examples: `# In an editor's MCP config, for the project the editor has open:
flyctl mcp

# For a given project:
flyctl mcp --workspace ~/src/my_app

# Only what drives a running app, and dart mcp-server's tools but pub:
flyctl mcp --tools app,dart --disable 'dart_pub*'

# Exit when flyd goes away instead of reconnecting:
flyctl mcp --reconnect-timeout 0

# With a flyd that is not installed next to flyctl or on PATH:
flyctl mcp --flyd ~/go/bin/flyd --start-timeout 30s`,
			},
			{
				name:    "status",
				summary: "show the daemon's state",
				usage:   "flyctl status [--json]",
				about:   statusAbout,
				run:     handle(cmdStatus),
				examples: `flyctl status
flyctl status --json | jq '.sessions[].client_name'`,
			},
			{
				name:    "runs",
				summary: "list flutter runs and builds",
				usage:   "flyctl runs [--all] [--workspace DIR] [--json]",
				about:   runsAbout,
				run:     handle(cmdRuns),
				examples: `flyctl runs
flyctl runs --all
flyctl runs --json | jq -r '.runs[] | select(.state == "running") | .run_id'`,
			},
			{
				name:    "stop",
				summary: "stop a run or build",
				usage:   "flyctl stop [--json] RUN",
				about:   stopAbout,
				run:     handle(cmdStop),
				examples: `flyctl stop 01jq3v6xk2
flyctl stop "$(flyctl runs --json | jq -r '.runs[0].run_id')"`,
			},
			{
				name:     "logs",
				summary:  "read or follow a run's log (logs tail)",
				needVerb: "logs needs a verb: flyctl logs tail [RUN | --latest] [flags]",
				badVerb:  "unknown logs verb %q; the verb is tail: flyctl logs tail [RUN | --latest] [flags]",
				verbs: []*command{{
					name:    "tail",
					summary: "print or follow a run's log",
					usage:   "flyctl logs tail [RUN | --latest] [flags]",
					about:   logsTailAbout,
					run:     handle(cmdLogsTail),
					examples: `flyctl logs tail --latest -f
flyctl logs tail 01jq3v6xk2 -n all -g 'Exception|Error'
flyctl logs tail --latest --since 10m -t
flyctl logs tail --latest -f -o json | jq -r 'select(.type == "entry") | .text'
flyctl logs tail --latest -f --exit-status && echo "app exited cleanly"
flyctl logs tail --cursor-file ~/.cache/app.cursor --latest   # only what is new since last time`,
				}},
			},
			{
				name:    "errors",
				summary: "print or follow a run's framework errors, deduplicated",
				usage:   "flyctl errors [RUN] [-f] [--all] [--json]",
				about:   errorsAbout,
				run:     handle(cmdErrors),
				examples: `flyctl errors
flyctl errors -f
flyctl errors 01j9 --json | jq -r '.errors[].location'`,
			},
			{
				name:    "apps",
				summary: "list the apps that run outside fly (an IDE's, a terminal's)",
				usage:   "flyctl apps [--json]",
				about:   appsAbout,
				run:     handle(cmdApps),
			},
			{
				name:    "screenshot",
				summary: "save what a run's screen shows as a PNG",
				usage:   "flyctl screenshot RUN [-o FILE] [--max-width N]",
				about:   screenshotAbout,
				run:     handle(cmdScreenshot),
				examples: `flyctl screenshot 01j9 -o shot.png
flyctl screenshot 01j9 --max-width 540 -o small.png`,
			},
			{
				name:    "grep",
				summary: "search the project's files from flyd's warm index",
				usage:   "flyctl grep [flags] PATTERN",
				about:   grepAbout,
				run:     handle(cmdGrep),
				examples: `flyctl grep setState
flyctl grep -g 'lib/**/*.dart' -i 'todo|fixme'
flyctl grep -F -C 2 'Navigator.of(context)'
flyctl grep --json StreamBuilder | jq '.files[].path'`,
			},
			{
				name:    "upstream",
				aliases: []string{"upstreams"},
				summary: "share your other MCP servers (dart mcp-server) through flyd",
				usage: `flyctl upstream add NAME [--share workspace|global|session] [--prefix P] [--env K=V]... [--timeout D] [--protocol V] [--force] -- COMMAND [ARGS...]
flyctl upstream list [--json]
flyctl upstream remove NAME
flyctl upstream restart NAME|--all`,
				about:    upstreamAbout,
				needVerb: "upstream needs a verb: add, list, remove or restart",
				badVerb:  "unknown upstream verb %q: add, list, remove or restart",
				verbs: []*command{
					{name: "add", summary: "adds (or with --force replaces) an entry", run: handle(cmdUpstreamAdd)},
					{name: "list", summary: "shows the entries and, if flyd runs, their processes", run: handle(cmdUpstreamList)},
					{name: "remove", aliases: []string{"rm"}, summary: "removes an entry; flyd stops its processes", run: handle(cmdUpstreamRemove)},
					{name: "restart", summary: "restarts the processes of an entry (or all, with --all)", run: handle(cmdUpstreamRestart)},
				},
				examples: `flyctl upstream add dart -- dart mcp-server
flyctl upstream add fs --share global -- npx -y @modelcontextprotocol/server-filesystem /home/me/notes
flyctl upstream list
flyctl upstream restart dart`,
			},
			{
				name:     "dashboard",
				summary:  "print (or --open) the address of flyd's live dashboard",
				usage:    "flyctl dashboard [--open]",
				about:    dashboardAbout,
				run:      handle(cmdDashboard),
				examples: "flyctl dashboard --open",
			},
			{
				name:     "token",
				summary:  "print or rotate the token of flyd's loopback HTTP listener",
				usage:    "flyctl token print\nflyctl token rotate",
				about:    tokenAbout,
				needVerb: "token needs one verb: print or rotate",
				badVerb:  "unknown token verb %q: print or rotate",
				verbs: []*command{
					{name: "print", summary: "prints the token", run: handle(cmdTokenPrint)},
					{name: "rotate", summary: "replaces it with a new one, which every HTTP client then needs", run: handle(cmdTokenRotate)},
				},
				examples: `flyctl token print
curl -H "Authorization: Bearer $(flyctl token print)" "http://$(cat ` + placeHTTPAddrFile + `)/v1/status"`,
			},
			{
				name:     "daemon",
				summary:  "stop flyd itself (daemon stop); its runs go on unless --runs",
				needVerb: "daemon needs a verb: flyctl daemon stop",
				badVerb:  "unknown daemon verb %q; the verb is stop: flyctl daemon stop",
				verbs: []*command{{
					name:    "stop",
					summary: "stop flyd cleanly, however it was started",
					usage:   "flyctl daemon stop [--runs] [--json] [--timeout D]",
					about:   daemonStopAbout,
					run:     handle(cmdDaemonStop),
					examples: `flyctl daemon stop
flyctl daemon stop --runs
flyctl daemon stop --json`,
				}},
			},
			{
				name:    "socket",
				summary: "print the daemon's socket path",
				usage:   "flyctl socket",
				about:   socketAbout,
				run:     handle(cmdSocket),
				examples: `flyctl socket
curl --unix-socket "$(flyctl socket)" http://flyd/v1/status`,
			},
			{
				name:     "config",
				summary:  "print or write editor MCP configuration (config mcp)",
				needVerb: "config needs a verb: flyctl config mcp --client " + strings.ReplaceAll(mcpClientNames(), ", ", "|"),
				badVerb:  "unknown config verb %q; the verb is mcp: flyctl config mcp --client CLIENT",
				verbs: []*command{{
					name:    "mcp",
					summary: "print or write an editor's MCP configuration",
					usage: `flyctl config mcp --client CLIENT [--workspace DIR] [--flyctl PATH] [--write]
flyctl config mcp --client CLIENT --http [--workspace DIR] [--write]
flyctl config mcp --client CLIENT --import [--write]`,
					about: configMCPAbout,
					run:   handle(cmdConfigMCP),
					examples: `flyctl config mcp --client vscode
flyctl config mcp --client cursor --write
flyctl config mcp --client claude --workspace ~/src/my_app --write
flyctl config mcp --client claude-code --import --write
flyctl config mcp --client vscode --http --write
flyctl config mcp --client cursor --tools app,files --write`,
				}},
			},
			{
				name:    "service",
				summary: "install and control flyd as a user service",
				usage:   "flyctl service <command> [flags]",
				about:   serviceAbout,
				badVerb: "service: unknown command %q (want install, uninstall, start, stop, restart or status)",
				verbs: []*command{
					{
						name:    "install",
						summary: "write the unit, enable it at login and start flyd",
						usage:   "flyctl service install [--force] [--allow-root] [--dry-run]",
						about:   serviceInstallAbout,
						run:     serviceVerb((*serviceCmd).install),
						examples: `flyctl service install
flyctl service install --dry-run
flyctl service install --force`,
					},
					{
						name:     "uninstall",
						summary:  "stop flyd and remove the unit",
						usage:    "flyctl service uninstall",
						about:    serviceUninstallAbout,
						run:      serviceVerb((*serviceCmd).uninstall),
						examples: "flyctl service uninstall",
					},
					{
						name:     "start",
						summary:  "start flyd now",
						usage:    "flyctl service start",
						about:    serviceStartAbout,
						run:      serviceVerb((*serviceCmd).control),
						examples: "flyctl service start\nflyctl service status",
					},
					{
						name:     "stop",
						summary:  "stop flyd until the next login or start",
						usage:    "flyctl service stop",
						about:    serviceStopAbout,
						run:      serviceVerb((*serviceCmd).control),
						examples: "flyctl service stop\nflyctl service status",
					},
					{
						name:     "restart",
						summary:  "stop and start flyd, e.g. after upgrading it",
						usage:    "flyctl service restart",
						about:    serviceRestartAbout,
						run:      serviceVerb((*serviceCmd).control),
						examples: "flyctl service restart\nflyctl service status",
					},
					{
						name:    "status",
						summary: "show whether the service is installed and running, and what it runs",
						usage:   "flyctl service status [--json]",
						about:   serviceStatusAbout,
						run:     serviceVerb((*serviceCmd).status),
						examples: `flyctl service status
flyctl service status --json | jq -r .state`,
					},
				},
				examples: `flyctl service install
flyctl service status`,
			},
			{
				name:    "setup",
				summary: "register fly in every MCP client here, and install the login service",
				usage:   "flyctl setup [--client CLIENT]... [--workspace DIR] [--yes] [--dry-run] [--no-service]",
				about:   setupAbout,
				run:     handle(cmdSetup),
				examples: `flyctl setup --dry-run
flyctl setup
flyctl setup --yes                                   # and share dart mcp-server through fly
flyctl setup --client claude --workspace ~/src/my_app
flyctl setup --client cursor --client codex --no-service`,
			},
			{
				name:    "doctor",
				summary: "check flyd, flutter, the clients' fly entries and the service",
				usage:   "flyctl doctor [--json]",
				about:   doctorAbout,
				run:     handle(cmdDoctor),
				examples: `flyctl doctor
flyctl doctor --json | jq -r '.checks[] | select(.status == "fail") | .fix'`,
			},
			{
				name:    "uninstall",
				summary: "undo setup: the clients' fly entries, the service and (asked) the state",
				usage:   "flyctl uninstall [--client CLIENT]... [--purge] [--dry-run]",
				about:   uninstallAbout,
				run:     handle(cmdUninstall),
				examples: `flyctl uninstall --dry-run
flyctl uninstall
flyctl uninstall --purge
flyctl uninstall --client vscode`,
			},
			{
				name:    "version",
				summary: "print flyctl's version",
				usage:   "flyctl version [--json]",
				about:   versionAbout,
				run:     handle(cmdVersion),
				examples: `flyctl version
flyctl version --json | jq -r .version`,
			},
		},
	}).link()
}
