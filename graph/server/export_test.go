package server

// WithoutSubmitFastPath turns the submitTask fast path off: the reference
// the fast path's tests compare it with.
func WithoutSubmitFastPath(o *Options) { o.noSubmitFast = true }

// SubmitFastPath reports how many requests the server's submitTask fast
// path answered itself, and how many it handed to the executor after
// running their resolver.
func (s *Server) SubmitFastPath() (answered, handed int64) {
	if s.fast == nil {
		return 0, 0
	}
	return s.fast.answered.Load(), s.fast.handed.Load()
}
