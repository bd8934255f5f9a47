package fakeflutter

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

var packageName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Dart reserved words, which are not valid package names.
var reserved = map[string]bool{
	"abstract": true, "as": true, "assert": true, "async": true, "await": true, "break": true, "case": true,
	"catch": true, "class": true, "const": true, "continue": true, "default": true, "do": true, "else": true,
	"enum": true, "export": true, "extends": true, "false": true, "final": true, "finally": true, "for": true,
	"if": true, "import": true, "in": true, "is": true, "new": true, "null": true, "return": true,
	"super": true, "switch": true, "this": true, "throw": true, "true": true, "try": true, "var": true,
	"void": true, "while": true, "with": true, "yield": true,
}

// create writes a minimal project: the files flutter create writes that
// matter to fly (pubspec, .metadata, lib, test, one file per platform
// folder, the lock and package config of the pub get that follows). It
// never overwrites a file, as flutter create does not.
func create(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, map[string]string{
		"--org": "org", "--project-name": "project-name", "--platforms": "platforms",
		"-t": "template", "--template": "template", "--description": "description",
		"-i": "ios-language", "--ios-language": "ios-language", "-a": "android-language", "--android-language": "android-language",
		"-e": "sample", "--sample": "sample",
	})
	if err != nil {
		fmt.Fprintf(stderr, "%v\n\n%s\n", err, usageHint)
		return ExitUsage
	}
	switch len(f.args) {
	case 0:
		fmt.Fprintf(stderr, "No option specified for the output directory.\nUsage: flutter create <output directory>\n\n%s\n", usageHint)
		return ExitUsage
	case 1:
	default:
		fmt.Fprintf(stderr, "Multiple output directories specified.\n\n%s\n", usageHint)
		return ExitUsage
	}
	out := f.args[0]
	abs, err := filepath.Abs(out)
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return ExitFailure
	}
	name := f.last("project-name", filepath.Base(abs))
	if !packageName.MatchString(name) || reserved[name] {
		fmt.Fprintf(stderr, "%q is not a valid Dart package name.\n\n"+
			"The name should consist of lowercase words separated by underscores, \"like_this\". "+
			"Use only basic Latin letters and Arabic digits: [a-z0-9_], and ensure the name is a valid Dart identifier "+
			"(i.e. it does not start with a digit and is not a reserved word).\n"+
			"See https://dart.dev/tools/pub/pubspec#name for more information.\n", name)
		return ExitFailure
	}
	org := f.last("org", "com.example")
	template := f.last("template", "app")
	platforms := strings.Split(f.last("platforms", "android,ios,linux,macos,web,windows"), ",")
	description := f.last("description", "A new Flutter project.")

	files := projectFiles(name, org, template, description, platforms)
	verb := "Creating"
	if _, err := os.Stat(filepath.Join(abs, "pubspec.yaml")); err == nil {
		verb = "Recreating"
	}
	fmt.Fprintf(stdout, "%s project %s...\n", verb, out)
	rels := make([]string, 0, len(files))
	for rel := range files {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	wrote := 0
	for _, rel := range rels {
		path := filepath.Join(abs, filepath.FromSlash(rel))
		if _, err := os.Lstat(path); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintf(stderr, "%v\n", err)
			return ExitFailure
		}
		if err := os.WriteFile(path, []byte(files[rel]), 0o644); err != nil {
			fmt.Fprintf(stderr, "%v\n", err)
			return ExitFailure
		}
		wrote++
	}
	fmt.Fprintf(stdout, "Resolving dependencies in `%s`...\n", out)
	fmt.Fprintln(stdout, "Downloading packages...")
	fmt.Fprintf(stdout, "Got dependencies in `%s`.\n", out)
	fmt.Fprintf(stdout, "Wrote %d files.\n\n", wrote)
	fmt.Fprintln(stdout, "All done!")
	fmt.Fprintln(stdout, "You can find general documentation for Flutter at: https://docs.flutter.dev/")
	fmt.Fprintln(stdout, "Detailed API documentation is available at: https://api.flutter.dev/")
	fmt.Fprintln(stdout, "If you prefer video documentation, consider: https://www.youtube.com/c/flutterdev")
	if template == "app" {
		fmt.Fprintf(stdout, "\nIn order to run your application, type:\n\n  $ cd %s\n  $ flutter run\n\n", out)
		fmt.Fprintf(stdout, "Your application code is in %s.\n", filepath.ToSlash(filepath.Join(out, "lib", "main.dart")))
	} else {
		fmt.Fprintf(stdout, "\nYour package code is in %s.\n", filepath.ToSlash(filepath.Join(out, "lib", name+".dart")))
	}
	return 0
}

// projectFiles returns the files of a new project by slash path.
func projectFiles(name, org, template, description string, platforms []string) map[string]string {
	files := map[string]string{
		"pubspec.yaml": `name: ` + name + `
description: "` + description + `"
publish_to: 'none'
version: 1.0.0+1

environment:
  sdk: ^` + DartVersion + `

dependencies:
  flutter:
    sdk: flutter
  cupertino_icons: ^1.0.8

dev_dependencies:
  flutter_test:
    sdk: flutter
  flutter_lints: ^4.0.0

flutter:
  uses-material-design: true
`,
		".metadata": `# This file tracks properties of this Flutter project.
# Used by Flutter tool to assess capabilities and perform upgrades etc.
#
# This file should be version controlled and should not be manually edited.

version:
  revision: "` + frameworkRev + `"
  channel: "stable"

project_type: ` + template + `
`,
		"analysis_options.yaml": "include: package:flutter_lints/flutter.yaml\n",
		".gitignore":            ".dart_tool/\nbuild/\n.flutter-plugins\n.flutter-plugins-dependencies\n",
		"README.md":             "# " + name + "\n\n" + description + "\n",
		"pubspec.lock": `packages:
  flutter:
    dependency: "direct main"
    description: flutter
    source: sdk
    version: "0.0.0"
sdks:
  dart: ">=` + DartVersion + ` <4.0.0"
`,
		".dart_tool/package_config.json": `{"configVersion":2,"packages":[],"generator":"pub"}` + "\n",
	}
	if template != "app" {
		files["lib/"+name+".dart"] = "/// A Calculator.\nclass Calculator {\n  int addOne(int value) => value + 1;\n}\n"
		files["test/"+name+"_test.dart"] = "import 'package:flutter_test/flutter_test.dart';\n\nimport 'package:" + name +
			"/" + name + ".dart';\n\nvoid main() {\n  test('adds one to input values', () {\n    expect(Calculator().addOne(2), 3);\n  });\n}\n"
		return files
	}
	files["lib/main.dart"] = `import 'package:flutter/material.dart';

void main() {
  runApp(const MyApp());
}

class MyApp extends StatelessWidget {
  const MyApp({super.key});

  @override
  Widget build(BuildContext context) {
    return MaterialApp(
      title: 'Flutter Demo',
      home: const MyHomePage(title: 'Flutter Demo Home Page'),
    );
  }
}

class MyHomePage extends StatefulWidget {
  const MyHomePage({super.key, required this.title});

  final String title;

  @override
  State<MyHomePage> createState() => _MyHomePageState();
}

class _MyHomePageState extends State<MyHomePage> {
  int _counter = 0;

  void _incrementCounter() {
    setState(() {
      _counter++;
    });
  }

  @override
  Widget build(BuildContext context) {
    return Scaffold(
      appBar: AppBar(title: Text(widget.title)),
      body: Center(child: Text('$_counter')),
      floatingActionButton: FloatingActionButton(
        onPressed: _incrementCounter,
        child: const Icon(Icons.add),
      ),
    );
  }
}
`
	files["test/widget_test.dart"] = `import 'package:flutter/material.dart';
import 'package:flutter_test/flutter_test.dart';

import 'package:` + name + `/main.dart';

void main() {
  testWidgets('Counter increments smoke test', (WidgetTester tester) async {
    await tester.pumpWidget(const MyApp());
    expect(find.text('0'), findsOneWidget);
    await tester.tap(find.byIcon(Icons.add));
    await tester.pump();
    expect(find.text('1'), findsOneWidget);
  });
}
`
	id := org + "." + name
	for _, p := range platforms {
		switch strings.TrimSpace(p) {
		case "android":
			files["android/app/build.gradle"] = "android {\n    namespace = \"" + id + "\"\n    defaultConfig {\n        applicationId = \"" + id + "\"\n    }\n}\n"
		case "ios":
			files["ios/Runner/Info.plist"] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\">\n<dict>\n\t<key>CFBundleIdentifier</key>\n\t<string>$(PRODUCT_BUNDLE_IDENTIFIER)</string>\n</dict>\n</plist>\n"
		case "macos":
			files["macos/Runner/Configs/AppInfo.xcconfig"] = "PRODUCT_NAME = " + name + "\nPRODUCT_BUNDLE_IDENTIFIER = " + id + "\n"
		case "linux":
			files["linux/CMakeLists.txt"] = "cmake_minimum_required(VERSION 3.13)\nproject(runner LANGUAGES CXX)\nset(BINARY_NAME \"" + name + "\")\nset(APPLICATION_ID \"" + id + "\")\n"
		case "windows":
			files["windows/CMakeLists.txt"] = "cmake_minimum_required(VERSION 3.14)\nproject(" + name + " LANGUAGES CXX)\nset(BINARY_NAME \"" + name + "\")\n"
		case "web":
			files["web/index.html"] = "<!DOCTYPE html>\n<html>\n<head>\n  <title>" + name + "</title>\n</head>\n<body>\n  <script src=\"flutter_bootstrap.js\" async></script>\n</body>\n</html>\n"
		}
	}
	return files
}
