package rtqueue

// parker is how a Get with nothing to take waits. Each registration in
// Queue.waiters receives exactly one unpark, so a parker can be reused for
// the next wait once park has returned.
type parker interface {
	prepare() // called under the queue lock before registering
	park()
	unpark() // called under the queue lock
}

// chanParker parks a goroutine the ordinary way. Waking it goes through
// Go's scheduler: some thread holding a P must run the woken goroutine's
// hand-off, which is fine for callers of Get that are not real time.
type chanParker struct{ ch chan struct{} }

func newChanParker() *chanParker { return &chanParker{ch: make(chan struct{}, 1)} }

func (c *chanParker) prepare() {}
func (c *chanParker) park()    { <-c.ch }
func (c *chanParker) unpark()  { c.ch <- struct{}{} }
