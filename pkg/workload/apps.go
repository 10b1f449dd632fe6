package workload

import (
	"fmt"
	"math"
	"time"
)

// The paper (Cypress, section 5) builds its apps from AWS Serverless
// Application Repository and OpenFaaS Store functions and replays their
// fitted execution-time models with sleep timers; it does not publish the
// fitted constants. The constants below are ours, chosen so that:
//   - each app's maximum end-to-end time is 0.5-1 s, which keeps the paper's
//     250-300 rps on its 288-core cluster feasible even without batching;
//   - the heaviest input runs 10-40x longer than the lightest, so batching
//     by input size matters;
//   - linear and power-law shapes are mixed, so that the profiler's choice by
//     R² matters (a linear model with a large intercept fits a power law
//     badly in log-log space, and a sub-linear power law fits a line badly);
//   - execution noise is 5% (the paper reports its fits are within ~7%).
//
// docs/experiments.md lists every model.
const (
	execNoise   = 0.05
	outputNoise = 0.05
)

var catalog = map[string]func() App{
	"image-compression":    imageCompression,
	"sentiment-analysis":   sentimentAnalysis,
	"email-categorization": emailCategorization,
	"audio-translation":    audioTranslation,
	"document-summary":     documentSummary,
}

// linearExec is a + b*size milliseconds.
func linearExec(a, b float64) (func(float64) time.Duration, string) {
	return func(s float64) time.Duration { return ms(a + b*s) }, linearText(a, b) + " ms"
}

// powerExec is a * size^b milliseconds.
func powerExec(a, b float64) (func(float64) time.Duration, string) {
	return func(s float64) time.Duration { return ms(a * math.Pow(s, b)) },
		fmt.Sprintf("%g·s^%g ms", a, b)
}

func linearOut(a, b float64) (func(float64) float64, string) {
	return func(s float64) float64 { return a + b*s }, linearText(a, b)
}

func powerOut(a, b float64) (func(float64) float64, string) {
	return func(s float64) float64 { return a * math.Pow(s, b) }, fmt.Sprintf("%g·s^%g", a, b)
}

// linearText writes a + b·s without zero terms.
func linearText(a, b float64) string {
	switch {
	case b == 0:
		return fmt.Sprintf("%g", a)
	case a == 0:
		return fmt.Sprintf("%g·s", b)
	}
	return fmt.Sprintf("%g + %g·s", a, b)
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func fn(name string, sensitive bool, exec func(float64) time.Duration, execModel string,
	out func(float64) float64, outModel string) Function {
	return Function{
		Name: name, SizeSensitive: sensitive,
		ExecMean: exec, ExecNoise: execNoise, ExecModel: execModel,
		OutputMean: out, OutputNoise: outputNoise, OutputModel: outModel,
	}
}

// imageCompression: a JPEG compressor over 0.1-8 MB images. Work grows a
// little slower than the pixel count because of fixed-size entropy tables.
func imageCompression() App {
	exec, em := powerExec(110, 0.8)
	out, om := linearOut(0, 0.35)
	return newApp("image-compression", "MB", 0.1, 8, fn("image-compress", true, exec, em, out, om))
}

// sentimentAnalysis: a text classifier over 1-64 KB of text, linear in the
// token count with a model-load intercept.
func sentimentAnalysis() App {
	exec, em := linearExec(25, 11)
	out, om := linearOut(0.2, 0)
	return newApp("sentiment-analysis", "KB", 1, 64, fn("sentiment", true, exec, em, out, om))
}

// emailCategorization: parse a 4-256 KB email (linear), then classify the
// extracted body text (power law, the classifier truncates long bodies).
func emailCategorization() App {
	pExec, pem := linearExec(12, 1.1)
	pOut, pom := powerOut(0.9, 0.92)
	cExec, cem := powerExec(9, 0.75)
	cOut, com := linearOut(0.1, 0)
	return newApp("email-categorization", "KB", 4, 256,
		fn("email-parse", true, pExec, pem, pOut, pom),
		fn("email-classify", true, cExec, cem, cOut, com))
}

// audioTranslation: speech-to-text over 32-1024 KB of audio (power law),
// translate the transcript (linear in its length), then send the message,
// whose cost does not depend on its size (the paper treats it as non-IS).
func audioTranslation() App {
	sExec, sem := powerExec(2.0, 0.82)
	sOut, som := linearOut(0.1, 0.012)
	tExec, tem := linearExec(20, 14)
	tOut, tom := linearOut(0, 1.15)
	mExec, mem := linearExec(45, 0)
	mOut, mom := linearOut(0.05, 0)
	return newApp("audio-translation", "KB", 32, 1024,
		fn("speech-to-text", true, sExec, sem, sOut, som),
		fn("text-translate", true, tExec, tem, tOut, tom),
		fn("send-message", false, mExec, mem, mOut, mom))
}

// documentSummary is our own chain: extract text from a 50-4096 KB PDF
// (linear in bytes, with a start-up cost), then summarise it (power law).
func documentSummary() App {
	eExec, eem := linearExec(15, 0.09)
	eOut, eom := powerOut(0.4, 0.85)
	sExec, sem := powerExec(4, 0.7)
	sOut, som := linearOut(1, 0)
	return newApp("document-summary", "KB", 50, 4096,
		fn("pdf-extract", true, eExec, eem, eOut, eom),
		fn("summarize", true, sExec, sem, sOut, som))
}
