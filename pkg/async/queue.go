package async

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Queue is the connection to JetStream: the stream of jobs and a consumer
// per band. It is safe for concurrent use.
type Queue struct {
	cfg Config
	// embedded is the in-process server (nil with Config.URL); tmp its
	// temporary store, removed at Close.
	embedded *server.Server
	tmp      string
	nc       *nats.Conn
	js       jetstream.JetStream
	// bands holds the consumers, least critical first.
	bands [Bands]jetstream.Consumer
	// maxPayload is the largest message the server takes.
	maxPayload int64
}

// Open connects to the queue (starting the embedded server when
// Config.URL is empty) and creates or updates the stream and consumers.
func Open(ctx context.Context, cfg Config) (*Queue, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	q := &Queue{cfg: cfg}
	if err := q.connect(); err != nil {
		q.Close()
		return nil, err
	}
	if err := q.declare(ctx); err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}

func (q *Queue) connect() error {
	// No reconnect buffer: while the connection is down a publish fails
	// at once. With nats.go's default 8 MiB buffer it waited there, the
	// client was told 503 "not stored" at the acknowledgement's timeout,
	// and the job was sent, stored and run once the server came back.
	opts := []nats.Option{nats.Name("gantry-gateway"), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(-1)}
	url := q.cfg.URL
	if url == "" {
		if err := q.startEmbedded(); err != nil {
			return err
		}
		opts = append(opts, nats.InProcessServer(q.embedded))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("%w: connecting to NATS: %v", ErrUnavailable, err)
	}
	q.nc = nc
	q.maxPayload = nc.MaxPayload()
	// Publishes go out without waiting for one another: each caller
	// waits for its own acknowledgement, while at most maxPendingAcks are
	// outstanding on the connection (a publisher past it waits, at most
	// stallWait).
	q.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPendingAcks),
		jetstream.WithPublishAsyncTimeout(ackTimeout))
	return err
}

// Bounds of the publishes awaiting their acknowledgement.
const (
	maxPendingAcks = 4096
	stallWait      = time.Second
	// ackTimeout ends a publish no acknowledgement answers (the server
	// gone), so that none is outstanding for ever.
	ackTimeout = 30 * time.Second
)

// startEmbedded runs nats-server in this process with JetStream on disk.
// It listens on no port: the gateway reaches it in-process.
func (q *Queue) startEmbedded() error {
	dir := q.cfg.StoreDir
	if dir == "" {
		var err error
		if q.tmp, err = os.MkdirTemp("", "gantry-jetstream-"); err != nil {
			return err
		}
		dir = q.tmp
	}
	ns, err := server.NewServer(&server.Options{ServerName: "gantry-embedded", DontListen: true, JetStream: true,
		StoreDir: dir, MaxPayload: DefaultMaxPayload, NoSigs: true, NoLog: true,
		JetStreamMaxStore: q.cfg.MaxBytes * 2})
	if err != nil {
		return fmt.Errorf("embedded NATS server: %w", err)
	}
	ns.Start()
	q.embedded = ns
	if !ns.ReadyForConnections(30 * time.Second) {
		return fmt.Errorf("%w: the embedded NATS server did not start within 30s", ErrUnavailable)
	}
	return nil
}

// declare creates or updates the work-queue stream (a job leaves it when
// acknowledged) and one durable pull consumer per band.
func (q *Queue) declare(ctx context.Context) error {
	_, err := q.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: Stream, Subjects: []string{subjectPrefix + ".>"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Discard: jetstream.DiscardNew,
		MaxMsgs: q.cfg.MaxJobs, MaxBytes: q.cfg.MaxBytes, Duplicates: 2 * time.Minute,
		Description: "Gantry's async invocations (pkg/async)"})
	if err != nil {
		return fmt.Errorf("%w: stream %s: %v", ErrUnavailable, Stream, err)
	}
	for b := range Bands {
		c, err := q.js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("%s%d", consumerName, b), FilterSubject: fmt.Sprintf("%s.b%d.>", subjectPrefix, b),
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: q.cfg.AckWait, MaxDeliver: -1,
			MaxAckPending: -1, DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			return fmt.Errorf("%w: consumer of band %d: %v", ErrUnavailable, b, err)
		}
		q.bands[b] = c
	}
	return nil
}

// MaxPayload is the largest body a job may carry (ErrTooLarge past it):
// the server's largest message less room for the headers.
func (q *Queue) MaxPayload() int64 { return max(0, q.maxPayload-maxHeaderRoom) }

// headerSize is the size of a message's headers as NATS writes them.
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// maxJobHeaders bounds a job's headers: the server's 64 KiB less a margin,
// since its count of the bytes may differ from headerSize's by a little.
const maxJobHeaders = 60 << 10

// maxHeaderRoom is the room kept in a message for the job's headers.
const maxHeaderRoom = 64 << 10

// Publish stores a job and returns once JetStream acknowledged it: the job
// is then on disk (and replicated, on a cluster). Concurrent publishes do
// not wait for one another's acknowledgements. It returns ErrFull at
// the queue's bound, ErrTooLarge for a job past MaxPayload, and
// ErrUnavailable when the queue cannot be reached.
func (q *Queue) Publish(ctx context.Context, j *Job) error {
	if int64(len(j.Body)) > q.MaxPayload() {
		return fmt.Errorf("%w: %d bytes over the queue's limit of %d", ErrTooLarge, len(j.Body), q.MaxPayload())
	}
	m := j.message()
	if n := headerSize(m.Header); n > maxJobHeaders {
		// The server refuses it too, but as an API error that reads like
		// an outage: the client's headers are the cause, and it is told.
		return fmt.Errorf("%w: its headers (the callback URL included) take %d bytes, over the queue's limit of %d",
			ErrTooLarge, n, maxJobHeaders)
	}
	f, err := q.js.PublishMsgAsync(m, jetstream.WithStallWait(stallWait))
	if err == nil {
		select {
		case <-f.Ok():
			return nil
		case err = <-f.Err():
		case <-ctx.Done():
			err = ctx.Err()
		}
		// JetStream's refusal (the stream full, ...) or no stream to take
		// it: not stored. Anything else is a message sent whose answer did
		// not come (a timeout, the connection lost): it may be stored.
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) && !errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("%w: no acknowledgement: %v", ErrUnconfirmed, err)
		}
	}
	switch {
	case errors.Is(err, jetstream.ErrTooManyStalledMsgs):
		return fmt.Errorf("%w: %d publishes await their acknowledgement: %v", ErrFull, maxPendingAcks, err)
	case isFull(err):
		return fmt.Errorf("%w: %v", ErrFull, err)
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// isFull reports JetStream refusing a message at the stream's bounds
// (DiscardNew).
func isFull(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return strings.Contains(apiErr.Description, "maximum messages") || strings.Contains(apiErr.Description, "maximum bytes")
}

// Depth is the jobs stored: waiting, or running and not yet acknowledged.
func (q *Queue) Depth(ctx context.Context) (uint64, error) {
	s, err := q.js.Stream(ctx, Stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

// Close drains the connection (acknowledgements in flight reach the
// server) and stops the embedded server.
func (q *Queue) Close() {
	if q.nc != nil {
		_ = q.nc.Drain()
		for i := 0; i < 100 && !q.nc.IsClosed(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
		q.nc.Close()
	}
	if q.embedded != nil {
		q.embedded.Shutdown()
		q.embedded.WaitForShutdown()
	}
	if q.tmp != "" {
		_ = os.RemoveAll(q.tmp)
	}
}
