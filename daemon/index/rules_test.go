package index

import (
	"strings"
	"testing"
)

func TestRulesServed(t *testing.T) {
	r := DefaultRules()
	tests := []struct {
		rel  string
		want bool
	}{
		{"lib/main.dart", true},
		{"pubspec.yaml", true},
		{"pubspec.lock", true},
		{"analysis_options.yaml", true},
		{".metadata", true},
		{"l10n.yaml", true},
		{"lib/l10n/app_en.arb", true},
		{"android/app/build.gradle", true},
		{"android/build.gradle.kts", true},
		{"android/gradle.properties", true},
		{"android/app/src/main/AndroidManifest.xml", true},
		{"android/app/src/main/kotlin/com/x/MainActivity.kt", true},
		{"ios/Podfile", true},
		{"ios/Podfile.lock", true},
		{"ios/Runner/AppDelegate.swift", true},
		{"ios/Runner/Info.plist", true},
		{"ios/Runner/Runner-Bridging-Header.h", true},
		{"macos/Runner/x.mm", true},
		{"linux/CMakeLists.txt", true},
		{"linux/main.cc", true},
		{"windows/runner/main.cpp", true},
		{"web/index.html", true},
		{"web/manifest.json", true},
		{"README.md", true},
		{"lib/MAIN.DART", true}, // extensions are case insensitive
		{"android/app/google-services.json", true},
		{"lib/main.g.dart", true},  // generated, still served
		{"assets/logo.png", false}, // not allowlisted
		{"Makefile", false},        // no extension, not a name
		{"podfile", false},         // names are exact
		{"lib/.dart", false},       // a dot file has no extension
		{"android/key.properties", false},
		{"android/local.properties", false},
		{"android/app/upload.jks", false},
		{".env", false},
		{"config/.env.production", false},
		{"certs/server.pem", false},
		{"android/app.iml", false},
		{".flutter-plugins", false},
		{".flutter-plugins-dependencies", false},
		{"build/app/outputs/x.json", false},
		{"packages/a/build/x.dart", false},
		{".dart_tool/package_config.json", false},
		{".git/config", false},
		{"ios/Pods/Manifest.lock", false},
		{"ios/.symlinks/plugins/x/pubspec.yaml", false},
		{"ios/Flutter/ephemeral/flutter_lldb_helper.py", false},
		{"ios/Flutter/ephemeral/Flutter-Generated.xcconfig.json", false},
		{"linux/flutter/ephemeral/generated_config.cmake.txt", false},
		{"ios/Flutter/AppFrameworkInfo.plist", true},
		// Credentials and hidden directories (a root that is not a project).
		{".ssh/config.json", false},
		{".aws/credentials.json", false},
		{".gnupg/pubring.json", false},
		{".docker/config.json", false},
		{"docker/config.json", true},
		{"gh/hosts.yml", false},
		{"config/gh/hosts.yml", false},
		{"ci/hosts.yml", true},
		{"dart/pub-credentials.json", false},
		{".netrc", false},
		{".git-credentials", false},
		{"gcloud/application_default_credentials.json", false},
		{"gcloud/credentials.json", false},
		{"keys/cert.pem", false},
		{".config/x/settings.json", false},
		{".cache/x.json", false},
		{".cursor/mcp.json", false},
		{".github/workflows/ci.yml", true},
		{".vscode/launch.json", true},
		{".run/main.dart.run.xml", true},
		{"web/.well-known/assetlinks.json", true},
		{"node_modules/x/package.json", false},
		{".fvm/flutter_sdk/version.json", false},
		{".idea/workspace.xml", false},
		{"android/.gradle/x.lock", false},
		{"lib/build.dart", true},     // a file named like a skipped dir
		{"lib/builder/x.dart", true}, // a dir that only starts like one
		// Other spellings of a secret, which a case-insensitive file
		// system opens as the secret.
		{"android/KEY.PROPERTIES", false},
		{"android/Local.Properties", false},
		{".ENV", false},
		{"config/.Env.Production", false},
		{"GH/hosts.yml", false},
		{"Gh/HOSTS.YAML", false},
		{"android/key.propertıes", false},
		{".e\u200cnv", false}, // a zero-width non-joiner
		{".SSH/config.json", false},
		{".Docker/config.json", false},
		{".GITHUB/workflows/ci.yml", false}, // only the exact hidden names are served
		// Names Windows reads as another file or a device.
		{"lib/con.dart", false},
		{"lib/Aux.g.dart", false},
		{"lib/com1.dart", false},
		{"con/main.dart", false},
		{"lib/main.dart:stream.dart", false},
		{"lib/main.dart.", false},
		{"lib./main.dart", false},
		{"DOCKER~1/config.json", false},
		{"android/PUB-CR~1.JSO", false},
		{"lib/console.dart", true},
	}
	for _, tt := range tests {
		if got := r.served(tt.rel); got != tt.want {
			t.Errorf("served(%q) = %v, want %v", tt.rel, got, tt.want)
		}
		if got := r.compile().served(tt.rel); got != tt.want {
			t.Errorf("compile().served(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

func TestRulesCustom(t *testing.T) {
	r := Rules{Extensions: []string{".dart"}, Names: []string{"Makefile", "key.properties"}}
	tests := []struct {
		rel  string
		want bool
	}{
		{"lib/a.dart", true},
		{"lib/a.yaml", false},
		{"Makefile", true},
		{"android/key.properties", false}, // a secret, whatever the allowlist says
		{"build/a.dart", false},           // a skipped dir, whatever the allowlist says
	}
	for _, tt := range tests {
		if got := r.served(tt.rel); got != tt.want {
			t.Errorf("served(%q) = %v, want %v", tt.rel, got, tt.want)
		}
		if got := r.compile().served(tt.rel); got != tt.want {
			t.Errorf("compile().served(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

func TestRulesIsSecret(t *testing.T) {
	tests := []struct {
		rel  string
		want bool
	}{
		{"android/key.properties", true},
		{"key.properties", true},
		{"android/local.properties", true},
		{"android/Key.Properties", true},
		{"android/app/upload-keystore.jks", true},
		{"android/app/UPLOAD.JKS", true},
		{"android/debug.keystore", true},
		{"ios/cert.p12", true},
		{"ios/cert.pfx", true},
		{"certs/ca.pem", true},
		{"certs/server.key", true},
		{".env", true},
		{"app/.env", true},
		{".env.local", true},
		{".env.production", true},
		{".envrc", true},
		{"android/gradle.properties", false},
		{"android/app/google-services.json", false},
		{"ios/Runner/GoogleService-Info.plist", false},
		{"lib/env.dart", false},
		{"lib/keys.dart", false},
		{".environment", false},
		{"app.iml", false},          // skipped, not secret
		{".flutter-plugins", false}, // skipped, not secret
		// Any case, on every system: macOS and Windows open the same file.
		{"android/KEY.PROPERTIES", true},
		{".ENV", true},
		{".ENV.LOCAL", true},
		{".Envrc", true},
		{"CREDENTIALS.JSON", true},
		{"GH/hosts.yml", true},
		{".DOCKER/config.json", true},
		{"certs/CA.PEM", true},
		{"android/key.propertıes", true},       // ı: Windows's upper case is I
		{"android/key.propertieſ", true},       // ſ: macOS folds it to s
		{"android/Key.properties", true},       // the Kelvin sign: macOS folds it to k
		{"android/key\u200d.properties", true}, // HFS+ ignores a zero-width joiner
	}
	for _, tt := range tests {
		if got := isSecret(tt.rel); got != tt.want {
			t.Errorf("isSecret(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

func TestRulesSkipDir(t *testing.T) {
	tests := []struct {
		rel  string
		want bool
	}{
		{"", false},
		{"lib", false},
		{"lib/src/features", false},
		{"build", true},
		{"build/app", true},
		{"packages/x/build", true},
		{"example/build/web", true},
		{".dart_tool", true},
		{".git", true},
		{".git/objects", true},
		{".idea", true},
		{".gradle", true},
		{"android/.gradle", true},
		{"ios/Pods", true},
		{"macos/Pods/Target Support Files", true},
		{"node_modules", true},
		{".fvm", true},
		{".fvm/flutter_sdk", true},
		{".pub-cache", true},
		{".pub", true},
		{"ios/.symlinks", true},
		{"ios/.symlinks/plugins", true},
		{"ios/Flutter/ephemeral", true},
		{"macos/Flutter/ephemeral", true},
		{"linux/flutter/ephemeral", true},
		{"windows/flutter/ephemeral/.plugin_symlinks", true},
		{"ios/Flutter", false},
		{"linux/flutter", false},
		{"lib/ephemeral", false},
		{"lib/builds", false},
		{"lib/Build", false}, // names are exact
		{"pods", false},
	}
	for _, tt := range tests {
		if got := skipDir(tt.rel); got != tt.want {
			t.Errorf("skipDir(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

func TestRulesIsGenerated(t *testing.T) {
	tests := []struct {
		rel  string
		want bool
	}{
		{"lib/models/user.g.dart", true},
		{"lib/models/user.freezed.dart", true},
		{"test/user_test.mocks.dart", true},
		{"lib/generated_plugin_registrant.dart", false},
		{"ios/Runner/GeneratedPluginRegistrant.m", true},
		{"ios/Runner/GeneratedPluginRegistrant.h", true},
		{"android/app/src/main/java/io/flutter/plugins/GeneratedPluginRegistrant.java", true},
		{"lib/models/user.dart", false},
		{"lib/g.dart", false},
		{"lib/freezed.dart", false},
	}
	for _, tt := range tests {
		if got := IsGenerated(tt.rel); got != tt.want {
			t.Errorf("IsGenerated(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

func TestRulesCmpPathKeys(t *testing.T) {
	tests := []struct {
		a    string
		aDir bool
		b    string
		bDir bool
		want int
	}{
		{"a", false, "b", false, -1},
		{"a", false, "a", true, -1},   // "a" < "a/"
		{"a", true, "a.b", false, 1},  // "a/" > "a.b"
		{"a", true, "a.b", true, 1},   // "a/" > "a.b/"
		{"a", true, "a0", false, -1},  // "a/" < "a0"
		{"a", true, "a", true, 0},     // same directory
		{"ab", false, "a", true, 1},   // "ab" > "a/"
		{"a-b", false, "a", true, -1}, // "a-b" < "a/"
		{"x/a", true, "x/a", false, 1},
	}
	for _, tt := range tests {
		if got := cmpPathKeys(tt.a, tt.aDir, tt.b, tt.bDir); got != tt.want {
			t.Errorf("cmpPathKeys(%q, %v, %q, %v) = %d, want %d", tt.a, tt.aDir, tt.b, tt.bDir, got, tt.want)
		}
	}
}

func TestRulesRefusal(t *testing.T) {
	r := DefaultRules()
	tests := []struct{ rel, want string }{
		{"lib/main.dart", ""},
		{"android/KEY.PROPERTIES", "secret"},
		{".ENV", "secret"},
		{"lib/con.dart", "device on Windows"},
		{"lib/main.dart:x", "alternate data stream"},
		{"lib./a.dart", "ends in a dot"},
		{"SSH~1/id.pem", "short name"},
		{"build/x.dart", "under build/"},
	}
	for _, tt := range tests {
		got := r.Refusal(tt.rel)
		if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
			t.Errorf("Refusal(%q) = %q, want one saying %q", tt.rel, got, tt.want)
		}
	}
}
