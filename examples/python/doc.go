// Package python holds the tests of the Python example plugin,
// plexporter-pyexample (README.md): the host runs it, in its manifest's
// sandbox when the test runs as root, and serves what it collects. The
// plugin itself is plexporter-pyexample and its stubs generated from proto/;
// there is no Go code to import here.
package python
