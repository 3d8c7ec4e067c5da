package model

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestGoldenTables pins the printed tables of `flashmend model` (text format,
// default parameters) in testdata/*.txt. Run `go test ./internal/model -run
// Golden -update` after an intended change and review the diff.
func TestGoldenTables(t *testing.T) {
	direct, err := DirectSweepTable(DirectPaperParams(), 1e-16, 1e-3, 1)
	if err != nil {
		t.Fatal(err)
	}
	reparo, err := ReparoTables(PaperReparoParams())
	if err != nil {
		t.Fatal(err)
	}
	chameleon, err := ChameleonTables(PaperChameleonParams())
	if err != nil {
		t.Fatal(err)
	}
	ecc, err := ECCTables(1024*8+560, 40, 1e-5, 1e-2, 2, []float64{1e-15, 1e-16})
	if err != nil {
		t.Fatal(err)
	}
	for name, tables := range map[string][]Table{
		"direct_table1": {DirectTable1()},
		"direct_sweep":  {direct},
		"reparo":        reparo,
		"chameleon":     chameleon,
		"ecc":           ecc,
	} {
		var buf bytes.Buffer
		if err := WriteTables(&buf, FormatText, tables); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", name+".txt")
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s differs from %s (run with -update after an intended change):\n%s", name, path, buf.String())
		}
	}
}

// TestWriteTablesFormats checks the CSV and JSON renderings of one table.
func TestWriteTablesFormats(t *testing.T) {
	tbl := Table{
		Title:   "t",
		Columns: []Column{{Name: "name"}, {Name: "value", Format: "%.1f"}},
		Rows:    [][]Cell{{Label("a, b"), Num(0.25)}},
		Notes:   []string{"n"},
	}
	for f, want := range map[Format]string{
		FormatText: "t\nname  value\na, b  0.2\nnote: n\n",
		FormatCSV:  "name,value\n\"a, b\",0.25\n",
		FormatJSON: "[\n  {\n    \"title\": \"t\",\n    \"columns\": [\n      \"name\",\n      \"value\"\n    ],\n    \"rows\": [\n      {\n        \"name\": \"a, b\",\n        \"value\": 0.25\n      }\n    ],\n    \"notes\": [\n      \"n\"\n    ]\n  }\n]\n",
	} {
		var buf bytes.Buffer
		if err := WriteTables(&buf, f, []Table{tbl}); err != nil {
			t.Fatal(err)
		}
		if buf.String() != want {
			t.Errorf("%s:\n%q\nwant\n%q", f, buf.String(), want)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("xml accepted")
	}
}
