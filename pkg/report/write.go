package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// Files written by WriteDir, relative to its directory.
const (
	CSVFile      = "results.csv"
	JSONFile     = "results.json"
	MarkdownFile = "report.md"
	PlotsDir     = "plots"
)

// PrepareDir creates dir and checks that files can be written in it, so that
// a long experiment does not fail only at the end.
func PrepareDir(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, PlotsDir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".gantry-write-check-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	name := f.Name()
	return errors.Join(f.Close(), os.Remove(name))
}

// WriteDir writes results.csv, results.json, plots/*.png (none with
// doc.NoPlots) and report.md into dir, creating it if needed.
func WriteDir(dir string, doc Document) error {
	if len(doc.Records) == 0 {
		return ErrNoRecords
	}
	if err := os.MkdirAll(filepath.Join(dir, PlotsDir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := writeFile(filepath.Join(dir, CSVFile), func(f *os.File) error {
		return WriteCSV(f, doc.Records)
	}); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, JSONFile), func(f *os.File) error {
		return WriteFullJSON(f, doc.Records)
	}); err != nil {
		return err
	}
	if !doc.NoPlots {
		if err := drawAll(dir, &doc); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(dir, MarkdownFile), func(f *os.File) error {
		return WriteMarkdown(f, doc)
	})
}

// writeAllPlots draws every group's plots, several groups at a time: a paper
// matrix has some 180 of them and drawing is CPU-bound.
func writeAllPlots(dir string, records []Record, draws []groupPlot) (map[string][]string, error) {
	groups := GroupRecords(records)
	files := make([][]string, len(groups))
	errs := make([]error, len(groups))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, g := range groups {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			files[i], errs[i] = writePlots(dir, g, draws)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i, g := range groups {
		for _, f := range files[i] {
			out[g.Key()] = append(out[g.Key()], filepath.ToSlash(filepath.Join(PlotsDir, f)))
		}
	}
	return out, nil
}

// writeFile creates path, lets fill write it, and reports the first error,
// including the one from Close, which is where a full disk shows up.
func writeFile(path string, fill func(*os.File) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, f.Close())
		if err != nil {
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	return fill(f)
}

// drawAll draws the document's plots and figures into dir's plots folder
// and records their files in doc.
func drawAll(dir string, doc *Document) error {
	draws := allPlots
	if doc.OnlyCDFPerCondition {
		draws = cdfOnly
	}
	plots, err := writeAllPlots(filepath.Join(dir, PlotsDir), doc.Records, draws)
	if err != nil {
		return err
	}
	doc.Plots = plots
	if len(doc.Traces) > 0 {
		file, err := drawTraces(filepath.Join(dir, PlotsDir), doc.TracesYLabel, doc.Traces)
		if err != nil {
			return err
		}
		doc.FigureFiles = append(doc.FigureFiles, file)
	}
	for _, f := range doc.Figures {
		file, err := f.draw(filepath.Join(dir, PlotsDir))
		if err != nil {
			return err
		}
		doc.FigureFiles = append(doc.FigureFiles, file)
	}
	return nil
}
