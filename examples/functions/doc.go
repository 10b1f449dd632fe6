// Package functions holds Gantry's example serverless functions: real
// programs whose run time grows with their input, one per function in the
// paper's apps (pkg/workload), plus a model-replay function that sleeps for
// the simulator's execution-time model instead.
//
// Every function is served by the same HTTP shape, OpenFaaS of-watchdog's
// HTTP mode, so the gateway and the load generator need no per-function code:
//
//   - POST / takes the input as the request body and answers with the output.
//   - X-Input-Size (request, optional) is the input size in the function's
//     unit; without it the size is the body length in that unit.
//   - X-Output-Size (every successful response) is the output size in the
//     unit of the next function in the chain; the gateway forwards it as the
//     next call's X-Input-Size.
//   - Bad input is 400 and a body past the bound 413, each with a one-line
//     reason; a function failure is 500.
//   - GET /_/health is 200 once the function is ready.
//
// Sizes use binary units: 1 KB is 1024 bytes and 1 MB is 1024 KB.
package functions
