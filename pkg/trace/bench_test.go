package trace

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// The paper matrix generates a trace per condition; generation must stay
// negligible next to simulation.
func BenchmarkGenerateTwitterOneHour(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		if _, err := Generate("twitter", 3139, time.Hour, uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadCSVOneDay(b *testing.B) {
	var sb strings.Builder
	for s := range 86400 {
		sb.WriteString(strconv.Itoa(s))
		sb.WriteString(",")
		sb.WriteString(strconv.Itoa(100 + s%50))
		sb.WriteString("\n")
	}
	in := sb.String()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := ReadCSV(strings.NewReader(in)); err != nil {
			b.Fatal(err)
		}
	}
}
