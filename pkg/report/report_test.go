package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sampleRecords() []Record {
	cdf := func(scale float64) []CDFPoint {
		return []CDFPoint{{0, 0}, {100 * scale, 0.5}, {300 * scale, 0.99}, {400 * scale, 1}}
	}
	return []Record{
		{App: "image-compression", Dist: "heavy", Trace: "poisson", Policy: "atoll", SLOMs: 697,
			Requests: 1000, ContainersSpawned: 200, AvgContainers: 150.5, PeakContainers: 210, WorkFloor: 70, Bound: 72,
			Oracle: 80, FixedPool: 84, FixedPoolSLO: 0.9998, OraclePredicted: 96, OraclePredictedSLO: 1,
			SLOCompliance: 0.9999, P50Ms: 300, P95Ms: 450, P99Ms: 520, P999Ms: 600,
			MeanQueueMs: 1, MeanColdStartMs: 2, MeanExecMs: 300, JobsPerContainer: 5,
			EnergyJ: 123456, ColdStarts: 3, WallS: 0.5, LatencyCDF: cdf(1)},
		{App: "image-compression", Dist: "heavy", Trace: "poisson", Policy: "cypress", SLOMs: 697,
			Requests: 1000, ContainersSpawned: 114, AvgContainers: 90, PeakContainers: 120, WorkFloor: 70, Bound: 72,
			Oracle: 80, FixedPool: 84, FixedPoolSLO: 0.9998, OraclePredicted: 96, OraclePredictedSLO: 1,
			SLOCompliance: 0.9997, P50Ms: 320, P95Ms: 480, P99Ms: 560, P999Ms: 650,
			MeanQueueMs: 20, MeanColdStartMs: 2, MeanExecMs: 300, JobsPerContainer: 8.77,
			EnergyJ: 100000, ColdStarts: 1, WallS: 0.25, LatencyCDF: cdf(1.1)},
		{App: "audio-translation", Dist: "light", Trace: "wiki", Policy: "cypress", SLOMs: 990,
			Requests: 3000, ContainersSpawned: 50, AvgContainers: 40, PeakContainers: 52,
			SLOCompliance: 0.98, P50Ms: 500, P99Ms: 1200, P999Ms: 1500, JobsPerContainer: 60,
			EnergyJ: 5000, WallS: 1, Functions: []FunctionRecord{
				{Name: "speech-to-text", Requests: 3000, ContainersSpawned: 30, AvgContainers: 25, PeakContainers: 31, P50Ms: 300, P99Ms: 700, MeanQueueMs: 12, MeanExecMs: 280, JobsPerContainer: 120, ColdStarts: 2},
				{Name: "send-message", Requests: 3000, ContainersSpawned: 5, AvgContainers: 4, PeakContainers: 5, P50Ms: 45, P99Ms: 60, MeanExecMs: 45, JobsPerContainer: 750},
			}},
	}
}

// A stopped run writes its data and report but draws nothing: drawing is
// what made an interrupted matrix take seconds to exit.
func TestWriteDirWithoutPlotsDrawsNothing(t *testing.T) {
	dir := t.TempDir()
	if err := WriteDir(dir, Document{Title: "stopped", Records: sampleRecords(), NoPlots: true}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CSVFile, JSONFile, MarkdownFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	pngs, err := filepath.Glob(filepath.Join(dir, PlotsDir, "*.png"))
	if err != nil || len(pngs) != 0 {
		t.Errorf("plots drawn: %v (%v)", pngs, err)
	}
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(md, []byte(".png")) {
		t.Errorf("report.md links a plot that was not drawn:\n%s", md)
	}
}

func TestWriteDirWritesEveryFile(t *testing.T) {
	dir := t.TempDir()
	err := WriteDir(dir, Document{Title: "Simulation", Records: sampleRecords()})
	if err != nil {
		t.Fatal(err)
	}
	var full struct{ Runs []Record }
	readJSON(t, filepath.Join(dir, JSONFile), &full)
	if !slices.EqualFunc(full.Runs, sampleRecords(), func(a, b Record) bool {
		return a.Policy == b.Policy && a.ContainersSpawned == b.ContainersSpawned && len(a.LatencyCDF) == len(b.LatencyCDF)
	}) {
		t.Errorf("results.json runs = %+v", full.Runs)
	}
	rows := readCSV(t, filepath.Join(dir, CSVFile))
	if len(rows) != 4 || !slices.Equal(rows[0], csvHeader) || rows[2][3] != "cypress" || rows[2][8] != "114" {
		t.Errorf("results.csv = %v", rows)
	}
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"image-compression_heavy_poisson", "audio-translation_light_wiki"} {
		for _, kind := range []string{"containers", "live", "slo", "latency-cdf"} {
			name := filepath.Join(PlotsDir, g+"-"+kind+".png")
			checkPNG(t, filepath.Join(dir, name))
			if !bytes.Contains(md, []byte("("+filepath.ToSlash(name)+")")) {
				t.Errorf("report.md does not link %s", name)
			}
		}
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("%s: %v is too small", path, b)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestSummaryJSONHasExactlyTheDocumentedFields(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSummaryJSON(&buf, sampleRecords()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimSpace(buf.String()), "\n"); n != 0 {
		t.Errorf("summary is %d lines, want one object on one line", n+1)
	}
	var top map[string][]map[string]any
	if err := json.Unmarshal(buf.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	if len(top) != 1 || len(top["runs"]) != 3 {
		t.Fatalf("got %v", top)
	}
	want := []string{"app", "avg_containers", "bound", "bound_vs_oracle", "cold_starts", "containers_spawned", "dist", "energy_j",
		"fixed_pool_vs_oracle", "jobs_per_container", "oracle_predicted_vs_oracle", "p50_ms", "p99_ms", "policy", "rejected", "requests",
		"slo_compliance", "trace", "vs_bound", "vs_oracle", "wall_s", "work_floor"}
	var got []string
	for k := range top["runs"][1] {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	if top["runs"][1]["slo_compliance"].(float64) != 0.9997 {
		t.Errorf("slo_compliance must be a fraction, got %v", top["runs"][1]["slo_compliance"])
	}
}

// The markdown report is compared with a golden file; run with -update after
// an intended change and review the diff.
func TestMarkdownMatchesGolden(t *testing.T) {
	doc := Document{
		Title: "Gantry simulation", Intro: "Seed 1.", PerFunction: true,
		Sections: []Section{{Heading: "Beside the paper", Body: "| a | b |\n|---|---|\n| 1 | 2 |"}},
		Records:  sampleRecords(),
		Plots:    map[string][]string{"image-compression_heavy_poisson": {"plots/x.png"}},
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, doc); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden.md")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("report.md differs from %s:\n%s", golden, buf.String())
	}
}

func TestMarkdownComparesContainersWithAtoll(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, Document{Title: "t", Records: sampleRecords()}); err != nil {
		t.Fatal(err)
	}
	// cypress spawned 114 against atoll's 200: 43% fewer.
	if !strings.Contains(buf.String(), "| cypress | 1000 | 114 | -43% |") {
		t.Errorf("missing the containers change against Atoll:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "99.97%") {
		t.Error("SLO compliance is not shown as a percentage")
	}
}

func TestNothingToReportIsAnError(t *testing.T) {
	if err := WriteDir(t.TempDir(), Document{}); !errors.Is(err, ErrNoRecords) {
		t.Errorf("WriteDir = %v, want ErrNoRecords", err)
	}
	if err := WriteMarkdown(&bytes.Buffer{}, Document{}); !errors.Is(err, ErrNoRecords) {
		t.Errorf("WriteMarkdown = %v, want ErrNoRecords", err)
	}
}

func TestWriteDirFailsCleanlyOnUnwritableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(filepath.Join(file, "sub"), Document{Records: sampleRecords()}); err == nil {
		t.Error("WriteDir into a path under a regular file succeeded")
	}
	if err := PrepareDir(filepath.Join(file, "sub")); err == nil {
		t.Error("PrepareDir under a regular file succeeded")
	}
	dir := filepath.Join(t.TempDir(), "new")
	if err := PrepareDir(dir); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != PlotsDir {
		t.Errorf("PrepareDir left %v behind", entries)
	}
}

func TestGroupRecordsKeepsOrderAndSplitsByCondition(t *testing.T) {
	gs := GroupRecords(sampleRecords())
	if len(gs) != 2 || len(gs[0].Runs) != 2 || gs[1].App != "audio-translation" {
		t.Fatalf("groups = %+v", gs)
	}
	if _, ok := gs[1].Policy("atoll"); ok {
		t.Error("found an atoll run that is not there")
	}
}

func TestWriteDirDrawsSummaryFigures(t *testing.T) {
	dir := t.TempDir()
	fig := Figure{File: "summary.png", Title: "Containers against Atoll", YLabel: "%",
		Categories: []string{"kraken", "cypress"},
		Series:     []Series{{"heavy", []float64{-10, -40}}, {"light", []float64{-30, -60}}}}
	if err := WriteDir(dir, Document{Title: "t", Records: sampleRecords(), Figures: []Figure{fig}}); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, filepath.Join(dir, PlotsDir, "summary.png"))
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if !bytes.Contains(md, []byte("## Summary plots\n\n![plots/summary.png](plots/summary.png)")) {
		t.Errorf("report.md does not show the summary figure:\n%s", md)
	}
	empty := Figure{File: "empty.png", Series: fig.Series}
	if err := WriteDir(t.TempDir(), Document{Records: sampleRecords(), Figures: []Figure{empty}}); !errors.Is(err, ErrEmptyFigure) {
		t.Errorf("figure without categories: %v, want ErrEmptyFigure", err)
	}
	fig.Series[1].Values = []float64{1}
	if err := WriteDir(t.TempDir(), Document{Records: sampleRecords(), Figures: []Figure{fig}}); err == nil {
		t.Error("a series with the wrong number of values was drawn")
	}
}

func TestOnlyCDFPerConditionDrawsOnlyTheCDFs(t *testing.T) {
	dir := t.TempDir()
	if err := WriteDir(dir, Document{Title: "t", Records: sampleRecords(), OnlyCDFPerCondition: true}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, PlotsDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), "-latency-cdf.png") {
			t.Errorf("drew %s", e.Name())
		}
	}
	if len(entries) != 2 {
		t.Errorf("%d plots, want one CDF per condition (2)", len(entries))
	}
}

func TestComplianceNeverRoundsUpToAPerfectScore(t *testing.T) {
	cases := map[float64]string{1: "100.00%", 0.99996: "99.99%", 0.9997: "99.97%", 0.5: "50.00%", 0: "0.00%"}
	for in, want := range cases {
		if got := Compliance(in); got != want {
			t.Errorf("Compliance(%v) = %s, want %s", in, got, want)
		}
	}
}

func TestWriteTableHasOneLinePerRun(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, sampleRecords()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[2], "cypress") || !strings.Contains(lines[2], "99.97%") ||
		!strings.Contains(lines[2], "+25.0%") || !strings.Contains(lines[2], "+28.6%") ||
		!strings.Contains(lines[2], "1.125×") || !strings.Contains(lines[2], "1.050×") || !strings.Contains(lines[2], "1.200×") {
		t.Errorf("table:\n%s", buf.String())
	}
}

func TestWriteDirDrawsTheTraces(t *testing.T) {
	dir := t.TempDir()
	doc := Document{Title: "t", Records: sampleRecords(), Traces: []TraceSeries{
		{Name: "wiki", PerSecond: []float64{300, 310, 331, 290}},
		{Name: "twitter", PerSecond: []float64{100, 250, 120, 110}},
	}}
	if err := WriteDir(dir, doc); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, filepath.Join(dir, PlotsDir, TracesFile))
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if !bytes.Contains(md, []byte("(plots/"+TracesFile+")")) {
		t.Error("report.md does not show the traces")
	}
	doc.Traces = append(doc.Traces, TraceSeries{Name: "empty"})
	if err := WriteDir(t.TempDir(), doc); err == nil {
		t.Error("an empty trace was drawn")
	}
}
