package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxLine bounds one line of input; an Azure row is ~1440 short numbers.
const maxLine = 1 << 20

// maxSeconds bounds a replayed trace (MaxDuration, one week) so that a bad
// second column or a long file cannot make us allocate without limit.
const maxSeconds = int(MaxDuration / time.Second)

// ReadCSV reads per-second arrival counts. Each line is either "count" or
// "second,count"; seconds must increase, and missing seconds count as zero.
// A first line with no number in it is a header. Blank lines and lines
// starting with '#' are skipped. Errors name the line.
func ReadCSV(r io.Reader) (Trace, error) {
	p := csvParser{}
	err := eachLine(r, p.line)
	if err != nil {
		return Trace{}, err
	}
	t := Trace{Name: "csv", PerSecond: p.counts}
	if err := t.Validate(); err != nil {
		return Trace{}, err
	}
	return t, nil
}

type csvParser struct {
	counts    []float64
	total     float64
	rows      int
	sawHeader bool
	firstSec  int
	lastSec   int
	twoColumn bool
}

func (p *csvParser) line(n int, text string) error {
	fields := splitFields(text)
	if p.rows == 0 && !p.sawHeader && isHeader(fields) {
		p.sawHeader = true
		return nil
	}
	if p.rows == 0 {
		p.twoColumn = len(fields) == 2
	}
	p.rows++
	if err := p.checkWidth(fields); err != nil {
		return lineErr(n, err)
	}
	if p.twoColumn {
		return p.addTimed(n, fields)
	}
	count, err := parseCount(fields[0])
	if err != nil {
		return lineErr(n, err)
	}
	if len(p.counts) >= maxSeconds {
		return lineErr(n, fmt.Errorf("more than %d seconds (%v)", maxSeconds, MaxDuration))
	}
	return p.add(n, count)
}

// add appends one second's count, holding the file to MaxRate and
// MaxRequests as it goes.
func (p *csvParser) add(n int, count float64) error {
	if count > MaxRate {
		return lineErr(n, fmt.Errorf("count %v is above %v requests per second", count, float64(MaxRate)))
	}
	p.total += count
	if p.total > MaxRequests {
		return lineErr(n, fmt.Errorf("the file expects more than %.0e requests in all", float64(MaxRequests)))
	}
	p.counts = append(p.counts, count)
	return nil
}

func (p *csvParser) checkWidth(fields []string) error {
	want := 1
	if p.twoColumn {
		want = 2
	}
	if len(fields) != want {
		return fmt.Errorf("want %d column(s), got %d", want, len(fields))
	}
	return nil
}

func (p *csvParser) addTimed(n int, fields []string) error {
	sec, err := strconv.Atoi(fields[0])
	if err != nil || sec < 0 {
		return lineErr(n, fmt.Errorf("second %q is not a non-negative integer", fields[0]))
	}
	count, err := parseCount(fields[1])
	if err != nil {
		return lineErr(n, err)
	}
	if len(p.counts) == 0 {
		p.firstSec = sec
	} else if sec <= p.lastSec {
		return lineErr(n, fmt.Errorf("second %d does not follow second %d", sec, p.lastSec))
	}
	if sec-p.firstSec >= maxSeconds {
		return lineErr(n, fmt.Errorf("second %d is more than a week after the first", sec))
	}
	p.lastSec = sec
	for len(p.counts) < sec-p.firstSec {
		p.counts = append(p.counts, 0)
	}
	return p.add(n, count)
}

// ReadAzure reads the Azure Functions 2019 invocation format: a header, then
// one row per function per day with HashOwner, HashApp, HashFunction,
// Trigger and 1440 per-minute counts. Rows whose HashFunction equals
// function are summed (all rows when function is empty), and each minute's
// count is spread evenly over its 60 seconds.
func ReadAzure(r io.Reader, function string) (Trace, error) {
	p := azureParser{function: function}
	if err := eachLine(r, p.line); err != nil {
		return Trace{}, err
	}
	if p.matched == 0 {
		return Trace{}, fmt.Errorf("%w: no row for function %q", ErrMalformed, function)
	}
	t := Trace{Name: "azure", PerSecond: p.perSecond()}
	if err := t.Validate(); err != nil {
		return Trace{}, err
	}
	return t, nil
}

const (
	azureMinutes  = 1440
	azureFixed    = 4
	azureFuncCol  = 2
	secondsPerMin = 60
)

type azureParser struct {
	function  string
	sawHeader bool
	matched   int
	perMinute []float64
	total     float64
}

func (p *azureParser) line(n int, text string) error {
	fields := splitFields(text)
	if !p.sawHeader {
		p.sawHeader = true
		if len(fields) < azureFixed || !strings.EqualFold(fields[0], "HashOwner") {
			return lineErr(n, errors.New("want an Azure Functions header starting with HashOwner"))
		}
		return nil
	}
	if len(fields) != azureFixed+azureMinutes {
		return lineErr(n, fmt.Errorf("want %d columns, got %d", azureFixed+azureMinutes, len(fields)))
	}
	if p.function != "" && fields[azureFuncCol] != p.function {
		return nil
	}
	return p.add(n, fields[azureFixed:])
}

func (p *azureParser) add(n int, minutes []string) error {
	if p.perMinute == nil {
		p.perMinute = make([]float64, azureMinutes)
	}
	for i, f := range minutes {
		c, err := parseCount(f)
		if err != nil {
			return lineErr(n, fmt.Errorf("minute %d: %w", i+1, err))
		}
		p.perMinute[i] += c
		p.total += c
		if p.perMinute[i] > MaxRate*secondsPerMin {
			return lineErr(n, fmt.Errorf("minute %d: %v requests is above %v per minute", i+1, p.perMinute[i], float64(MaxRate*secondsPerMin)))
		}
	}
	if p.total > MaxRequests {
		return lineErr(n, fmt.Errorf("the file expects more than %.0e requests in all", float64(MaxRequests)))
	}
	p.matched++
	return nil
}

func (p *azureParser) perSecond() []float64 {
	out := make([]float64, 0, len(p.perMinute)*secondsPerMin)
	for _, c := range p.perMinute {
		for range secondsPerMin {
			out = append(out, c/secondsPerMin)
		}
	}
	return out
}

// eachLine calls fn with 1-based line numbers, skipping blanks and comments.
func eachLine(r io.Reader, fn func(n int, text string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxLine)
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if err := fn(n, text); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: after line %d: %w", ErrMalformed, n, err)
	}
	return nil
}

func splitFields(text string) []string {
	fields := strings.Split(text, ",")
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return fields
}

// isHeader is true when no field parses as a number.
func isHeader(fields []string) bool {
	for _, f := range fields {
		if _, err := strconv.ParseFloat(f, 64); err == nil {
			return false
		}
	}
	return true
}

func parseCount(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("count %q is not a non-negative number", s)
	}
	return v, nil
}

func lineErr(n int, err error) error {
	return fmt.Errorf("%w: line %d: %w", ErrMalformed, n, err)
}
