package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
	"time"
)

// The bench's copy of the sysfs reader's racy window equals the reader's
// own constant (plugins/internal/sysfs/held.go, out of the bench's import
// reach by Go's internal rule).
func TestSysfsRacyWindowInStep(t *testing.T) {
	path := repoFile(t, "plugins", "internal", "sysfs", "held.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var expr ast.Expr
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "RacyWindow" && len(vs.Values) == 1 {
			expr = vs.Values[0]
		}
		return expr == nil
	})
	if expr == nil {
		t.Fatalf("%s: no const RacyWindow; update sysfsRacyWindow in nodeexp.go to the reader's window", path)
	}
	units := map[string]time.Duration{"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute}
	var got time.Duration
	switch e := expr.(type) {
	case *ast.BinaryExpr: // n * time.Unit
		lit, ok1 := e.X.(*ast.BasicLit)
		sel, ok2 := e.Y.(*ast.SelectorExpr)
		if ok1 && ok2 && e.Op == token.MUL && lit.Kind == token.INT && units[sel.Sel.Name] != 0 {
			var n int64
			for _, c := range lit.Value {
				n = n*10 + int64(c-'0')
			}
			got = time.Duration(n) * units[sel.Sel.Name]
		}
	case *ast.SelectorExpr: // time.Unit
		got = units[e.Sel.Name]
	}
	if got == 0 {
		t.Fatalf("%s: RacyWindow is no longer `n * time.Unit`; teach this test its form", path)
	}
	if got != sysfsRacyWindow {
		t.Fatalf("plugins/internal/sysfs.RacyWindow is %v, the bench's sysfsRacyWindow %v: update nodeexp.go", got, sysfsRacyWindow)
	}
}
